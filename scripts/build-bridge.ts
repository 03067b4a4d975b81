/**
 * Bundles the bridge's container entry point (functions/bridge/main.ts) into one ESM file for `node` — what the
 * image in infra/bridge/Dockerfile runs, and what the entry-point tests start.
 *
 *   npx tsx scripts/build-bridge.ts [outfile]        # default .local/bridge/bridge.mjs
 */
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const DEFAULT_OUTFILE = `${ROOT}.local/bridge/bridge.mjs`;

export async function bundleBridge(outfile = DEFAULT_OUTFILE): Promise<string> {
  await build({
    entryPoints: [`${ROOT}functions/bridge/main.ts`],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'warning',
    // client-node → node-fetch 2 → whatwg-url 5 → tr46 0.0.3 require('punycode'), which resolves to Node's
    // deprecated built-in (DEP0040 warning at start-up). The userland package has the same API.
    alias: { punycode: 'punycode/punycode.js' },
    // Some bundled CommonJS packages call require() for Node built-ins; give the ESM bundle one.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
  });
  return outfile;
}

const USAGE = `usage: npx tsx scripts/build-bridge.ts [outfile]

Bundles the bridge (functions/bridge/main.ts) into one ESM file with a linked source map; default outfile
${DEFAULT_OUTFILE}`;

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    console.log(USAGE);
    process.exit(0);
  }
  if (args.length > 1 || args[0]?.startsWith('-')) {
    console.error(`unexpected arguments: ${args.join(' ')}\n${USAGE}`);
    process.exit(2);
  }
  bundleBridge(args[0]).then(
    (out) => console.log(`bundled ${out}`),
    (e) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
