/**
 * The gateway dialects: what the product sends to and reads from kube-ovn's NAT gateway, per release line
 * (docs/compatibility.md, docs/adr/0075-gateway-dialects.md, docs/adr/0076-choosing-a-gateway-dialect.md). Pure:
 * no I/O; the core and the audit call it with what they read.
 */
export * from './calls.js';
export * from './costs.js';
export * from './detect.js';
export * from './dialects.js';
export * from './failures.js';
export * from './inspect.js';
export * from './parse.js';
