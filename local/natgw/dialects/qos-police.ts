/**
 * EIP QoS of kube-ovn 1.12–1.15: a u32 filter with a police action per EIP and direction on the external
 * interface — ingress under the ingress qdisc (`match ip dst`), egress under an htb root `1:0` (`match ip src`).
 * An existing filter for the address is deleted first; no op checks `init`, as in the script.
 */
import { formatIp } from '../addr.js';
import { beforeSlash, fields, grepWord, lines, type Op, type Run } from '../script.js';
import { words } from '../state.js';

function ingressQdiscId(r: Run): string {
  // qdisc_id=$(tc qdisc show dev <ext> ingress | awk '{print $3}')
  return lines(r.capture(`tc qdisc show dev ${r.extIf} ingress`))
    .map((l) => words(l)[2] ?? '')
    .join('\n');
}

/**
 * delete_tc_u32_filter: finds the first u32 filter under `qdiscId` matching `<direction> <ip>` and deletes it by
 * prio and handle. The script matches the text "dst 10.0.0.5" as a substring, which also hits 10.0.0.50; here
 * the address must be equal. Returns the status of its pipeline subshell.
 */
function deleteTcU32Filter(r: Run, qdiscId: string, ip: string, direction: 'src' | 'dst'): number {
  const dev = r.extIf;
  const listing = r.capture(`tc -p -s -d filter show dev ${dev} parent ${qdiscId}`);
  const parent = qdiscId === 'ingress' ? 'ffff:' : qdiscId.replace(/:0*$/, ':');
  const q = r.net.qdisc(dev, parent.replace(/^0+(?=.)/, ''));
  if (!q || listing === '') return 0;
  for (const p of [...q.prios].sort((a, b) => a.prio - b.prio)) {
    for (const n of p.nodes) {
      if (!n.key || n.key.direction !== direction) continue;
      const address = formatIp(n.key.match.family, n.key.match.value);
      if (address !== ip) continue;
      r.echo(`match IP ${direction} ${address}/${n.key.match.prefix}`);
      return r.execCmdInSubshell(
        `tc filter del dev ${dev} parent ${qdiscId} protocol ip prio ${p.prio} handle ${n.handle} u32`,
      );
    }
  }
  return 0;
}

function qosAdd(r: Run, rules: string[], direction: 'src' | 'dst'): void {
  const dev = r.extIf;
  for (const rule of rules) {
    const f = fields(rule);
    const ip = beforeSlash(f[0]);
    const [priority = '', rate = '', burst = ''] = f.slice(1);
    let qdiscId: string;
    if (direction === 'dst') {
      r.run(`tc qdisc add dev ${dev} ingress`, { quiet: true });
      qdiscId = ingressQdiscId(r);
    } else {
      qdiscId = '1:0';
      r.run(`tc qdisc add dev ${dev} root handle ${qdiscId} htb`, { quiet: true });
    }
    // del old filter: tc -p -s -d filter show … | grep -w <ip>
    const old = r.grep(`tc -p -s -d filter show dev ${dev} parent ${qdiscId}`, (l) => grepWord(l, ip));
    if (old) deleteTcU32Filter(r, qdiscId, ip, direction);
    r.execCmd(
      `tc filter add dev ${dev} parent ${qdiscId} protocol ip prio ${priority} u32 match ip ${direction} ${ip} police rate ${rate}Mbit burst ${burst}Mb drop flowid :1`,
    );
  }
}

export const eipIngressQosAdd: Op = (r, a) => qosAdd(r, a.rules, 'dst');
export const eipEgressQosAdd: Op = (r, a) => qosAdd(r, a.rules, 'src');

export const eipIngressQosDel: Op = (r, a) => {
  for (const rule of a.rules) {
    const ip = beforeSlash(fields(rule)[0]);
    const qdiscId = ingressQdiscId(r);
    r.status = qdiscId ? deleteTcU32Filter(r, qdiscId, ip, 'dst') : 0;
  }
};

export const eipEgressQosDel: Op = (r, a) => {
  for (const rule of a.rules) {
    const ip = beforeSlash(fields(rule)[0]);
    r.status = deleteTcU32Filter(r, '1:0', ip, 'src');
  }
};
