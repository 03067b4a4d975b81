/**
 * In-memory GatewayInspector: reads the simulated gateway behind a MemoryGateway pod with the same argv the real
 * adapter accepts (`isDialectInspectionArgv`), so the audit parses the simulator's real iproute2-style output.
 */

import { isDialectInspectionArgv } from '../../shared/domain/dialect/inspect.js';
import { GatewayCommandError } from '../../shared/domain/errors.js';
import type { GatewayInspector } from '../../shared/ports.js';
import type { MemoryGateway } from './gateway.js';

export function memoryInspector(gateway: MemoryGateway): GatewayInspector {
  return {
    async read(pod, argv) {
      if (!isDialectInspectionArgv(argv))
        throw new Error(`not an inspection command: ${JSON.stringify(argv.slice(0, 8))}`);
      const out = gateway.sim(pod).exec([...argv]);
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
