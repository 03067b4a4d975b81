/**
 * kube-ovn 1.13 (and 1.14, whose script is the same): the CNI sets the gateway's routes from the pod's routes
 * annotations, so the script stops touching them. `init` only creates the chains (its arguments are ignored, the
 * link is left as the CNI made it), `eip-add` takes `<ip>/<len>` alone — the whole argument goes to
 * `ip addr replace`, so 1.12's `<ip>/<len>,<gw>` fails there — and only runs duplicate address detection; the
 * `ext-subnet-route-*` ops are gone.
 */
import { beforeSlash, type Dialect, type Op } from '../script.js';
import { createChains, createJumps, exitIfInitialised } from './common.js';
import { NAT_OPS, USAGE } from './v1.12.js';

const init: Op = (r) => {
  exitIfInitialised(r);
  r.run('iptables -t nat -N DNAT_FILTER');
  createChains(r);
  createJumps(r);
};

const eipAdd: Op = (r, a) => {
  r.checkInited();
  for (const eip of a.rules) {
    r.execCmd(`ip addr replace ${eip} dev net1`);
    r.execCmd(`arping -I net1 -c 3 -D ${beforeSlash(eip)}`);
  }
};

export const v113: Dialect = {
  release: '1.13',
  argv: false,
  ops: { init, 'eip-add': eipAdd, ...NAT_OPS },
  silent: new Set(),
  unknown: (r) => r.echo(USAGE),
};

export const v114: Dialect = { ...v113, release: '1.14' };
