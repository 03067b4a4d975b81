/**
 * Addresses on the local stack's external subnet (172.18.0.0/24) that no EIP, allocation or pod holds, for tests that
 * create a static EIP or put an address on a gateway by hand.
 *
 * The allocator spreads random EIPs over the whole pool (docs/ipam.md; not lowest-first as kube-ovn), so any fixed
 * address may already be held by a random EIP of the same stack, and a random EIP created at the same moment as a
 * static one may take the static one's address first (first come, first served, as in kube-ovn; the static EIP then
 * says AddressConflict and is not Ready). A test that is not about that conflict takes its addresses from here, and
 * creates its static EIP before any random one of its own.
 */

/**
 * The first `count` addresses of 172.18.0.<from>-253 that are not in `taken` (addresses, with or without a /prefix).
 * @throws when fewer are free
 */
export function unusedAddresses(taken: Iterable<string>, { count = 1, from = 200 } = {}): string[] {
  const held = new Set([...taken].map((a) => a.split('/')[0]));
  const free = Array.from({ length: 254 - from }, (_, i) => `172.18.0.${from + i}`).filter(
    (a) => !held.has(a),
  );
  if (free.length < count)
    throw new Error(`fewer than ${count} of 172.18.0.${from}-253 are free: ${[...held].join(' ')}`);
  return free.slice(0, count);
}
