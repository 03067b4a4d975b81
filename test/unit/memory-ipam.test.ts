import { MemoryIpam } from '../../local/memory/ipam.js';
import { MemoryLeases } from '../../local/memory/leases.js';
import { describeIpamContract, describeLeasesContract } from '../contract/ipam.js';

const make = async (clock: { now(): number }) => ({
  ipam: new MemoryIpam(),
  leases: new MemoryLeases({ clock }),
});

describeIpamContract('in-memory', make);
describeLeasesContract('in-memory', make);
