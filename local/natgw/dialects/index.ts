/** Each release line's nat-gateway.sh, by release. */
import type { KubeOvnRelease } from '../releases.js';
import type { Dialect } from '../script.js';
import { master } from './master.js';
import { v112 } from './v1.12.js';
import { v113, v114 } from './v1.13.js';
import { v115 } from './v1.15.js';
import { v116 } from './v1.16.js';

export const DIALECTS: Readonly<Record<KubeOvnRelease, Dialect>> = {
  '1.12': v112,
  '1.13': v113,
  '1.14': v114,
  '1.15': v115,
  '1.16': v116,
  master,
};
