/**
 * Static addresses for tests that create a static EIP on the local stack's external subnet (172.18.0.0/24).
 *
 * The allocator spreads random EIPs over the whole pool (docs/ipam.md; not lowest-first as kube-ovn), so any fixed
 * address may already be held by a random EIP of the same stack, and a random EIP created at the same moment as a
 * static one may take the static one's address first (first come, first served, as in kube-ovn; the static EIP then
 * says AddressConflict and is not Ready). A test that is not about that conflict takes its static addresses from
 * here, among those no EIP or pod holds, and creates the static EIP before any random one of its own.
 */

/** The first `count` addresses of 172.18.0.200-249 that are not in `taken` (addresses, with or without a /prefix). */
export function unusedStaticAddresses(taken: Iterable<string>, count = 1): string[] {
  const held = new Set([...taken].map((a) => a.split('/')[0]));
  const free = Array.from({ length: 50 }, (_, i) => `172.18.0.${200 + i}`).filter((a) => !held.has(a));
  if (free.length < count)
    throw new Error(`fewer than ${count} of 172.18.0.200-249 are free: ${[...held].join(' ')}`);
  return free.slice(0, count);
}
