/**
 * kube-ovn master (to become 1.17): the controller execs the script as an argv and the script hands `"$@"` to its
 * functions, so an argument is one rule even with spaces in it (the echo line still joins them). `snat-add`
 * inserts each rule after the existing SHARED_SNAT rules with an equal or longer source prefix (longest prefix
 * first) instead of appending. The nft share-DNAT ops are new; the simulation does not model them.
 */
import { beforeSlash, type Dialect, fields, type Op } from '../script.js';
import { notSimulated } from './common.js';
import { snatMatch } from './nat-strict.js';
import { helpOps, helpText } from './v1.15.js';
import { OPS_116, v116 } from './v1.16.js';

/** 1 + the SHARED_SNAT rules whose `-s` prefix length is at least `prefix` (awk reads `10.0.0.5` as 10). */
function insertPosition(all: readonly string[], prefix: number): number {
  let n = 0;
  for (const l of all) {
    if (!l.startsWith('-A SHARED_SNAT ')) continue;
    const m = /-s [0-9.]+\/(\d+)/.exec(l);
    if (m && Number(m[1]) >= prefix) n++;
  }
  return n + 1;
}

const snatAdd: Op = (r, a) => {
  r.checkInited();
  const all = r
    .capture('iptables-save -t nat')
    .split('\n')
    .filter((l) => l.includes('SHARED_SNAT'));
  for (const rule of a.quoted) {
    const [first, internalCidr = '', randomFully = ''] = fields(rule);
    const eip = beforeSlash(first);
    if (snatMatch(all, eip, internalCidr).length > 0) continue;
    const prefix = Number.parseFloat(internalCidr.split('/').at(-1) ?? '') || 0;
    const spec = `-o ${r.extIf} -s ${internalCidr} -j SNAT --to-source ${eip} ${randomFully}`;
    r.execCmd(`iptables -t nat -I SHARED_SNAT ${insertPosition(all, prefix)} ${spec}`);
    // The script keeps its snapshot in step as it wrote the rule, not as iptables-save would print it.
    all.push(`-A SHARED_SNAT ${spec}`);
  }
};

const help = helpOps(
  helpText(
    ['  QOS_DEBUG           - Enable verbose QoS debugging output (default: false)'],
    [
      ['nft-dnat-map-add', 'Add nft map-based DNAT rule (Share type)'],
      ['nft-dnat-map-del', 'Delete nft map-based DNAT rule (Share type)'],
    ],
  ),
);

export const master: Dialect = {
  ...v116,
  release: 'master',
  argv: true,
  ops: {
    ...OPS_116,
    'snat-add': snatAdd,
    'nft-dnat-map-add': notSimulated('nft-dnat-map-add'),
    'nft-dnat-map-del': notSimulated('nft-dnat-map-del'),
    help: help.op,
    '--help': help.op,
    '-h': help.op,
  },
  unknown: help.unknown,
};
