/**
 * In-memory GatewayInspector: reads the simulated gateway behind a MemoryGateway pod with the same constant argv the
 * real adapter sends, so the audit parses the simulator's real iproute2-style output.
 */
import { type GatewayInspector, INSPECTION_ARGV } from '../../shared/audit/inspect.js';
import { GatewayCommandError } from '../../shared/domain/errors.js';
import type { MemoryGateway } from './gateway.js';

export function memoryInspector(gateway: MemoryGateway): GatewayInspector {
  return {
    async read(pod, command) {
      const argv = INSPECTION_ARGV[command];
      const out = gateway.sim(pod).exec(argv);
      if (out.exitCode !== 0)
        throw new GatewayCommandError(
          `${argv.join(' ')}: exit status ${out.exitCode}`,
          out.exitCode,
          out.stdout,
          out.stderr,
        );
      return { stdout: out.stdout, stderr: out.stderr };
    },
  };
}
