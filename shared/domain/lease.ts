/**
 * How long an EIP's lease may be held, in one place for the core (which asks for at most this, and never beyond
 * its invocation's deadline) and every Leases adapter (which cuts a longer request to this). One invocation does a
 * handful of API calls and execs within the function timeout (30 s in serverless.yml), so two minutes is ample;
 * a crashed holder blocks its EIP for at most this long.
 */
export const LEASE_MAX_MS = 120_000;

/** The lease key of an EIP. */
export const leaseKey = (eipName: string): string => `eip#${eipName}`;
