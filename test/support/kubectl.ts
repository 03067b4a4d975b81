/**
 * kubectl must run in CI: where it is missing, suites that need it fail loudly when CI=true, and elsewhere skip with
 * a printed reason.
 */
import { kubectlAvailability } from '../../local/kube-api/testing.js';

export function kubectlOrSkip(): { skip: boolean } {
  const a = kubectlAvailability();
  if (a.available) return { skip: false };
  if (process.env.CI === 'true') throw new Error(`kubectl is required in CI: ${a.reason}`);
  console.warn(`skipping kubectl tests: ${a.reason}`);
  return { skip: true };
}
