/**
 * Docs that stand on their own (docs/adr/0001-adr-format.md): nothing in the repository cites a document that is
 * not in it, every link into docs/kube-ovn-differences.md (from markdown or from a code comment) lands on a
 * heading that exists, every relative markdown link points at a file that exists, and every test the differences
 * catalogue names is still there under that title.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DIFFERENCES = 'docs/kube-ovn-differences.md';

// ------------------------------------------------------------------------------------------- the scanner

// The patterns are built from fragments, so that this file holds no citation itself and is scanned like any other.
const SECTION = '\u00a7';
const DESIGN = ['DES', 'IGN'].join('');
const OUTSIDE = ['sha', 'red'].join('');
const SEED = ['se', 'ed'].join('');
/** A planted broken anchor is spelt with this, so the repository-wide anchor check does not find it here. */
const HASH = '#';

/**
 * What counts as citing a document outside the repository: the section sign before a number (how the design and
 * spec documents were cited), the design document by name, the outside reference folder and the original controller's
 * source by path or by era, and defect codes. A defect code (the letter D and one or two digits) only counts in prose:
 * preceded by a space, "(", "*", "/" or a dash and followed by a closing bracket, punctuation, "*", "/", a dash or a
 * space, so a MAC, hex, base64 with "+" or an identifier never matches.
 */
const CITATIONS: readonly { what: string; re: RegExp }[] = [
  { what: 'a section of an outside document', re: new RegExp(`${SECTION}\\s*\\d`) },
  {
    what: 'the design document',
    re: new RegExp(`\\b${DESIGN}(\\.md)?\\b\\s*(${SECTION}|\\.md)|\\b${DESIGN}\\.md\\b`),
  },
  {
    what: 'a spec or reference section',
    re: new RegExp(`\\b(spec|reference)\\s+(spec\\s+)?${SECTION}`, 'i'),
  },
  {
    what: 'a path outside the repository',
    re: new RegExp(`\\b${OUTSIDE}/(${DESIGN}\\.md|reference/|${SEED}/)|/work/${OUTSIDE}\\b|${SEED}/vpc_nat`),
  },
  {
    what: 'an outside document by name',
    re: new RegExp(
      ['kube-ovn-eip-', 'spec|kube-api-', 'emulator\\.md|vpc_nat_gw_eip\\.go\\.', 'txt'].join(''),
    ),
  },
  {
    what: 'the original controller by era',
    re: new RegExp(`\\b${SEED}[- ]era\\b|\\b${SEED} controller\\b|\\b${SEED}:L\\d`, 'i'),
  },
  { what: 'a defect code', re: /(^|[ (*/–-])D\d{1,2}(?=[),:;.*' /–-]|$)/m },
];

interface Citation {
  line: number;
  what: string;
  text: string;
}

function citations(text: string): Citation[] {
  const out: Citation[] = [];
  text.split('\n').forEach((line, i) => {
    const hit = CITATIONS.find(({ re }) => re.test(line));
    if (hit) out.push({ line: i + 1, what: hit.what, text: line.trim().slice(0, 160) });
  });
  return out;
}

/** Tracked files (what a clone has); a tree walk when there is no git. Lockfiles and binaries are skipped. */
function repositoryFiles(): string[] {
  let files: string[];
  try {
    files = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
      .split('\0')
      .filter(Boolean);
  } catch {
    files = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(join(ROOT, dir))) {
        if (name === 'node_modules' || name.startsWith('.')) continue;
        const path = dir ? `${dir}/${name}` : name;
        if (statSync(join(ROOT, path)).isDirectory()) walk(path);
        else files.push(path);
      }
    };
    walk('');
  }
  return files.filter((f) => !f.endsWith('package-lock.json') && existsSync(join(ROOT, f)));
}

function readText(file: string): string | undefined {
  const buf = readFileSync(join(ROOT, file));
  return buf.includes(0) ? undefined : buf.toString('utf8');
}

// ------------------------------------------------------------------------------------------- anchors and links

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, … */
function headingSlugs(markdown: string): Set<string> {
  const slugs = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    slugs.add(n === 0 ? base : `${base}-${n}`);
  }
  return slugs;
}

interface Link {
  file: string;
  line: number;
  target: string;
}

/** Relative links of a markdown file (not URLs), outside code fences and inline code. */
function markdownLinks(file: string, text: string): Link[] {
  const out: Link[] = [];
  let fenced = false;
  text.split('\n').forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) return;
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      out.push({ file, line: i + 1, target });
    }
  });
  return out;
}

/** Links of a markdown file (path relative to ROOT) to a file that does not exist, or to a missing heading. */
function brokenLinks(file: string, text: string): string[] {
  const broken: string[] = [];
  for (const link of markdownLinks(file, text)) {
    const [path, anchor] = link.target.split('#') as [string, string | undefined];
    const target = path ? join(dirname(file), decodeURI(path)) : file;
    if (path && !existsSync(join(ROOT, target))) {
      broken.push(`${file}:${link.line}: ${link.target} (no such file)`);
      continue;
    }
    if (anchor && target.endsWith('.md')) {
      const markdown = target === file ? text : readFileSync(join(ROOT, target), 'utf8');
      if (!headingSlugs(markdown).has(anchor))
        broken.push(`${file}:${link.line}: ${link.target} (no such heading)`);
    }
  }
  return broken;
}

// ------------------------------------------------------------------------------------------- the tests

const files = repositoryFiles();
const texts = new Map(files.map((f) => [f, readText(f)] as const));
const differences = readFileSync(join(ROOT, DIFFERENCES), 'utf8');
const differenceSlugs = headingSlugs(differences);

describe('docs stand on their own', () => {
  it('no tracked file cites a design or spec section, a document outside the repository, or a defect code', () => {
    const found: string[] = [];
    for (const [file, text] of texts) {
      if (text === undefined) continue;
      for (const c of citations(text)) found.push(`${file}:${c.line}: ${c.what}: ${c.text}`);
    }
    expect(found).toEqual([]);
  });

  it('every reference to an anchor of the differences catalogue, in any file, names a heading that exists', () => {
    const broken: string[] = [];
    let seen = 0;
    for (const [file, text] of texts) {
      if (text === undefined) continue;
      for (const m of text.matchAll(/kube-ovn-differences\.md#([\p{L}\p{N}_-]+)/gu)) {
        seen++;
        if (!differenceSlugs.has(m[1]!)) broken.push(`${file}: #${m[1]}`);
      }
    }
    expect(broken).toEqual([]);
    expect(seen).toBeGreaterThan(10); // the code comments really do cite it
  });

  it('every relative link in a markdown file points at a file that exists, and at a heading that exists', () => {
    const broken: string[] = [];
    for (const [file, text] of texts) {
      if (text !== undefined && file.endsWith('.md')) broken.push(...brokenLinks(file, text));
    }
    expect(broken).toEqual([]);
  });

  it('every path docs/architecture.md names in backticks exists', () => {
    const architecture = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
    const paths = [
      ...architecture.matchAll(
        /`((?:functions|shared|local|infra|events|test|bench|scripts|docs|\.ci)\/[^`\s<>*|]*)`/g,
      ),
    ].map((m) => m[1]!);
    expect(paths.length).toBeGreaterThan(40);
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
  });

  it('docs/README.md lists every ADR in docs/adr/', () => {
    const index = readFileSync(join(ROOT, 'docs/README.md'), 'utf8');
    const adrs = files.filter((f) => /^docs\/adr\/\d{4}-.+\.md$/.test(f));
    expect(adrs.length).toBeGreaterThan(10);
    expect(adrs.filter((f) => !index.includes(`(${f.slice('docs/'.length)})`))).toEqual([]);
  });

  it('every test the differences catalogue names exists under that title', () => {
    const pins = [...differences.matchAll(/^\s*- `(test\/[^`]+)` › "(.+)"/gm)].map((m) => ({
      file: m[1]!,
      title: m[2]!.replace(/\\"/g, '"'),
    }));
    expect(pins.length).toBeGreaterThan(40);
    const missing = pins
      .filter(
        ({ file, title }) =>
          !existsSync(join(ROOT, file)) || !readFileSync(join(ROOT, file), 'utf8').includes(title),
      )
      .map(({ file, title }) => `${file} › ${title}`);
    expect(missing).toEqual([]);
  });

  it('every entry of the catalogue says what kube-ovn does, what this product does, why, and what pins it', () => {
    const entries = differences.split(/^### /m).slice(1);
    expect(entries.length).toBeGreaterThan(30);
    const incomplete = entries
      .filter((e) => !e.startsWith('Deliberate')) // entries there may be written in their own shape
      .filter(
        (e) =>
          !/\*\*kube-ovn[^*]*:\*\*/.test(e) ||
          !/\*\*Here:\*\*/.test(e) ||
          !/\*\*Why:\*\*/.test(e) ||
          !/\*\*Pinned by:\*\*/.test(e),
      )
      .map((e) => e.split('\n')[0]);
    expect(incomplete).toEqual([]);
  });
});

describe('the citation scanner', () => {
  // Planted citations of every kind the scan looks for, each in a line of its own (built from the same fragments).
  const S = SECTION;
  const planted = [
    ['a design section', ` * Error policy (${DESIGN} ${S}3.4): a permanent error`],
    ['a spec section', `// The routing table (reference spec ${S}3)`],
    ['a bare section number', ` * Conformance ${S}9.2 item 8`],
    ['the design file', `see ${DESIGN}.md for the decisions`],
    ['a path outside', `import spec from '../${OUTSIDE}/reference/x.md';`],
    ['the design file by path', ` * as ../${OUTSIDE}/${DESIGN}.md says`],
    ['the era of the original source', ` * nat-gateway.sh as shipped in the ${SEED}-era`],
    ['a defect code in a test title', `  it('writes the finalizer first (${'D'}3)', async () => {`],
    ['defect codes in a list', `are permanent errors (${'D'}1, ${'D'}9, ${'D'}20)`],
    ['a defect code leading a comment', `  // ${'D'}25: an address from a foreign subnet`],
    ['a bold defect code', `defect **${'D'}6**`],
    ['a range of defect codes', `the deletion defects (${'D'}5–${'D'}8) are fixed`],
    ['defect codes with a slash', `see ${'D'}5/${'D'}6 in the list`],
  ];
  it.each(planted)('catches %s', (_what, line) => {
    expect(citations(`first line\n${line}\nlast line`)).toEqual([expect.objectContaining({ line: 2 })]);
  });

  const innocent = [
    ['a MAC address', "expect(mac).toBe('00:00:00:D2:3F:10');"],
    ['hex', 'const mask = 0xD2 | 0xD12;'],
    ['base64', 'caData: LS0tLS1CRUd+D12/aW4gQ0VS'],
    ['an identifier', 'const D2x = sizes.D12 + AD3;'],
    ['a seed for a random generator', 'fc.assert(property, { seed: 42 }); // print the seed on failure'],
    ['a link to our own catalogue', ' * (docs/kube-ovn-differences.md#finalizer-before-allocation)'],
    ['an import of our own shared/', "import { poolsOf } from '../../shared/domain/addressing.js';"],
  ];
  it.each(innocent)('leaves %s alone', (_what, line) => {
    expect(citations(line)).toEqual([]);
  });

  it('computes the anchors GitHub gives headings', () => {
    const slugs = headingSlugs(
      '# Title\n### Finalizer before allocation\n### Eip-del never without an address\n```\n# not a heading\n```\n### `status.nat` from rule specs\n### Title\n',
    );
    expect([...slugs]).toEqual([
      'title',
      'finalizer-before-allocation',
      'eip-del-never-without-an-address',
      'statusnat-from-rule-specs',
      'title-1',
    ]);
  });

  it('finds a link to a missing file and to a missing heading, and accepts good ones', () => {
    const planted = [
      'See [the architecture](architecture.md) and [argv](kube-ovn-differences.md#argv-exec).',
      `Gone: [x](no-such-file.md), [y](kube-ovn-differences.md${HASH}no-such-heading), [z](#nor-here).`,
      '`[inline code](is-not-a-link.md)` and [a URL](https://example.com/x.md) are not checked.',
      '# A heading here',
      '[self](#a-heading-here)',
    ].join('\n');
    expect(brokenLinks('docs/planted.md', planted)).toEqual([
      'docs/planted.md:2: no-such-file.md (no such file)',
      `docs/planted.md:2: kube-ovn-differences.md${HASH}no-such-heading (no such heading)`,
      'docs/planted.md:2: #nor-here (no such heading)',
    ]);
  });
});
