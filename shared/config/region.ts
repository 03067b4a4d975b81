/**
 * The AWS region, found where the AWS CLI and SDKs look for it, in their order: `AWS_REGION`, `AWS_DEFAULT_REGION`
 * (the CLI's variable, which the JavaScript SDK ignores on its own), then the `region` of the profile in the shared
 * config file (`AWS_PROFILE`, else `default`; the file is `AWS_CONFIG_FILE`, else `~/.aws/config`). No region
 * anywhere is `undefined`: the caller says why it needs one, rather than guessing a region.
 *
 * In Lambda `AWS_REGION` is always set; the rest is for the command-line tools and the bridge on a laptop. The
 * environment is passed in by the two loaders (config.ts, bridge/config.ts), which are all that read it (ADR 0053).
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface RegionFound {
  region: string;
  /** Where it came from, for messages: `$AWS_REGION`, or `profile prod in /home/me/.aws/config`. */
  from: string;
}

/** A region name as AWS spells them (eu-west-1, us-gov-west-1, cn-north-1, eusc-de-east-1). */
export const REGION_NAME = /^[a-z]{2,4}(-[a-z]+)+-\d+$/;

export function resolveRegion(
  env: NodeJS.ProcessEnv,
  read: (path: string) => string | undefined = readIfExists,
): RegionFound | undefined {
  const variables: [string, string | undefined][] = [
    ['AWS_REGION', env.AWS_REGION],
    ['AWS_DEFAULT_REGION', env.AWS_DEFAULT_REGION],
  ];
  for (const [key, value] of variables) if (value?.trim()) return { region: value.trim(), from: `$${key}` };
  const file =
    env.AWS_CONFIG_FILE?.trim() || join(env.HOME || env.USERPROFILE || homedir(), '.aws', 'config');
  const profile = env.AWS_PROFILE?.trim() || 'default';
  const text = read(file);
  const region = text === undefined ? undefined : profileRegion(text, profile);
  return region ? { region, from: `profile ${profile} in ${file}` } : undefined;
}

/**
 * The `region` key of one profile in the shared config file's INI text: `[default]` or `[profile NAME]` (the
 * config file's spelling; `[NAME]` alone is accepted for `default` only, as the SDK does).
 */
export function profileRegion(text: string, profile: string): string | undefined {
  let inProfile = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/\s[#;].*$/, '').trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const section = /^\[\s*(?:profile\s+)?([^\]]+?)\s*\]$/.exec(line);
    if (section) {
      inProfile = section[1] === profile && (profile === 'default' || /^\[\s*profile\s/.test(line));
      continue;
    }
    if (!inProfile || /^\s/.test(raw)) continue; // an indented line belongs to a nested (service) setting
    const kv = /^([A-Za-z0-9_]+)\s*=\s*(.*)$/.exec(line);
    if (kv?.[1] === 'region' && kv[2]) return kv[2].trim();
  }
  return undefined;
}

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
