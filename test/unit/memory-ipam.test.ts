import { MemoryIpam } from '../../local/memory/ipam.js';
import { describeIpamContract } from '../contract/ipam.js';

describeIpamContract('in-memory', async () => ({ ipam: new MemoryIpam() }));
