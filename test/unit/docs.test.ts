/**
 * Docs that stand on their own (docs/adr/0001-adr-format.md): nothing in the repository cites a document that is
 * not in it or an issue of this project's tracker, every link into docs/kube-ovn-differences.md (from markdown or
 * from a code comment) lands on a heading that exists, every relative markdown link points at a file that exists,
 * and every test the differences catalogue names is still there under that title.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DIFFERENCES = 'docs/kube-ovn-differences.md';

// ------------------------------------------------------------------------------------------- the scanner

// The patterns are built from fragments, so that this file holds no citation itself and is scanned like any other.
const SECTION = '\u00a7';
const DESIGN_DOC = ['DES', 'IGN'].join('');
const OUTSIDE = ['sha', 'red'].join('');
const SEED = ['se', 'ed'].join('');
const ISSUE = ['iss', 'ue'].join('');
const BRIEF = ['bri', 'ef'].join('');
/** A planted broken anchor is spelt with this, so the repository-wide anchor check does not find it here. */
const HASH = '#';

/**
 * The names in the repository's own shared/ (files without their extension): a relative path into shared/ that goes
 * on to one of these is ours, any other is the folder of background documents outside the repository.
 */
const OWN_SHARED = readdirSync(join(ROOT, 'shared')).map((n) => n.replace(/\.[jt]s$/, ''));

/**
 * What counts as citing a document outside the repository: the section sign before a number (how the design and
 * spec documents were cited), the design document by name, the outside reference folder and the original controller's
 * source by path or by era, the helpers' instructions, and defect codes. A defect code (the letter D and one or two
 * digits) only counts in prose: preceded by a space, "(", "*", "/" or a dash and followed by a closing bracket,
 * punctuation, "*", "/", a dash or a space, so a MAC, hex, base64 with "+" or an identifier never matches.
 * And what counts as citing this project's own issue tracker, whose numbers mean nothing to a reader of a clone: an
 * issue by number in words (one or several, with or without "#"), or "the issue" as the source of a goal. An issue of
 * kube-ovn (or another upstream) is named as such and is allowed.
 */
const CITATIONS: readonly { what: string; re: RegExp }[] = [
  { what: 'a section of an outside document', re: new RegExp(`${SECTION}\\s*\\d`) },
  {
    what: 'the design document',
    re: new RegExp(`\\b${DESIGN_DOC}\\b`), // by name, with or without .md or a section
  },
  {
    what: 'a spec or reference section',
    re: new RegExp(`\\b(spec|reference)\\s+(spec\\s+)?${SECTION}`, 'i'),
  },
  {
    what: 'a path outside the repository',
    re: new RegExp(
      `\\b${OUTSIDE}/(${DESIGN_DOC}\\.md|reference/|${SEED}/)|/work/${OUTSIDE}\\b|${SEED}/vpc_nat`,
    ),
  },
  {
    what: 'the outside folder by a relative path',
    re: new RegExp(`(^|[^\\w.])(\\.\\./)+${OUTSIDE}\\b(?!/(${OWN_SHARED.join('|')})\\b)`),
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
  {
    what: 'the instructions the work was done from',
    re: new RegExp(
      `\\b(the|this|our|task|common|helper's)\\s+${BRIEF}\\b|\\b${BRIEF.toUpperCase()}[-\\w]*\\.md\\b`,
      'i',
    ),
  },
  { what: 'a defect code', re: /(^|[ (*/–-])D\d{1,2}(?=[),:;.*' /–-]|$)/m },
  {
    what: 'an issue of this project by number',
    re: new RegExp(
      `(?<!\\b(kube-ovn|kubeovn|upstream|kube-ovn's|upstream's)\\s+)\\b${ISSUE}s?\\s+(no\\.?\\s*)?#?\\d`,
      'i',
    ),
  },
  {
    what: 'the issue as the source of a goal',
    re: new RegExp(
      `\\b(the|this|that)\\s+${ISSUE}(['’]s\\b|\\s+(asks?|says|sets|names|counts|counted|wants|requires|lists)\\b)`,
      'i',
    ),
  },
];

/**
 * An issue by its bare number (a hash and digits), looked for in prose only — markdown, and the comments of code,
 * where the same characters in a string or a colour are something else. A reference that names its repository
 * (kubeovn/kube-ovn#18), an HTML entity and a heading anchor (a hash, digits and a dash) are not citations of this
 * project's tracker.
 */
const BARE_NUMBER: { what: string; re: RegExp } = {
  what: 'an issue by its bare number',
  re: /(?<![\w/&#])#\d+\b(?![-\w])/,
};

/**
 * Lines that name an outside path without citing it: CI pointing the network-namespace gateway test at kube-ovn's
 * scripts when they are beside the project (its input, not a document; docs/adr/0070-netns-gateway-mode.md).
 */
const NOT_CITATIONS: readonly { file: string; re: RegExp }[] = [
  {
    file: '.ci/run',
    re: new RegExp(
      `^\\s*(if \\[ -d |export EIP_KUBE_OVN_SCRIPTS=)\\.\\./${OUTSIDE}/reference/kube-ovn-gateway( ]; then)?$`,
    ),
  },
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

const CODE = /\.(ts|mts|cts|js|mjs|cjs)$/;
const K = ts.SyntaxKind;
/** Tokens after which a "/" divides; after anything else (an operator, "(", "return") it starts a regex. */
const ENDS_A_VALUE = new Set<ts.SyntaxKind>([
  K.Identifier,
  K.PrivateIdentifier,
  K.NumericLiteral,
  K.BigIntLiteral,
  K.StringLiteral,
  K.RegularExpressionLiteral,
  K.NoSubstitutionTemplateLiteral,
  K.TemplateTail,
  K.CloseParenToken,
  K.CloseBracketToken,
  K.CloseBraceToken,
  K.ThisKeyword,
  K.SuperKeyword,
  K.TrueKeyword,
  K.FalseKeyword,
  K.NullKeyword,
  K.PlusPlusToken,
  K.MinusMinusToken,
  K.ExclamationToken,
]);

/**
 * The comments of a TypeScript or JavaScript source, line by line with their line numbers, read with TypeScript's
 * own scanner (strings, template literals and regex literals are skipped as the compiler skips them; across the
 * repository it finds exactly the comments the parser attaches to the syntax tree).
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
function commentLines(source: string): { line: number; text: string }[] {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, source);
  const out: { line: number; text: string }[] = [];
  const braces: ('template' | 'brace')[] = [];
  let prev = K.Unknown;
  let line = 1;
  let counted = 0;
  for (let t = scanner.scan(); t !== K.EndOfFileToken; t = scanner.scan()) {
    if (t === K.SingleLineCommentTrivia || t === K.MultiLineCommentTrivia) {
      const start = scanner.getTokenStart();
      for (; counted < start; counted++) if (source.charCodeAt(counted) === 10) line++;
      for (const [i, text] of scanner.getTokenText().split('\n').entries())
        out.push({ line: line + i, text });
      continue;
    }
    if (t === K.WhitespaceTrivia || t === K.NewLineTrivia || t === K.ShebangTrivia) continue;
    if ((t === K.SlashToken || t === K.SlashEqualsToken) && !ENDS_A_VALUE.has(prev))
      t = scanner.reScanSlashToken();
    if (t === K.TemplateHead) braces.push('template');
    else if (t === K.OpenBraceToken) braces.push('brace');
    else if (t === K.CloseBraceToken && braces.pop() === 'template') {
      t = scanner.reScanTemplateToken(false);
      if (t === K.TemplateMiddle) braces.push('template');
    }
    prev = t;
  }
  return out;
}

/** Bare issue numbers in the prose of a file: every line of markdown, the comments of code. */
function bareNumbers(file: string, text: string): Citation[] {
  const prose = file.endsWith('.md')
    ? text.split('\n').map((t, i) => ({ line: i + 1, text: t }))
    : CODE.test(file)
      ? commentLines(text)
      : [];
  return prose
    .filter(({ text: t }) => BARE_NUMBER.re.test(t))
    .map(({ line, text: t }) => ({ line, what: BARE_NUMBER.what, text: t.trim().slice(0, 160) }));
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
    // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
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

// ------------------------------------------------------------------------------------------- ADR status lines

/** How one ADR relates to another on its Status line, and what the other ADR must say back (ADR 0058). */
const INVERSE: Record<string, string> = {
  supersedes: 'superseded by',
  'partly supersedes': 'partly superseded by',
  amends: 'amended by',
  extends: 'extended by',
};
for (const [k, v] of Object.entries(INVERSE)) INVERSE[v] = k;
const RELATION =
  /\b(partly superseded by|superseded by|partly supersedes|supersedes|amended by|amends|extended by|extends)\s+\[ADR (\d{4})\]\(([^)\s]+)\)/gi;

interface AdrStatus {
  base: 'accepted' | 'superseded' | undefined;
  relations: { kind: string; other: string; target: string }[];
}

/** The Status part of an ADR's `Date:` paragraph: whether it holds, and each relation it names. */
function adrStatus(text: string): AdrStatus {
  const start = text.search(/^Date: /m);
  const end = text.indexOf('\n\n', start);
  const para = start < 0 ? '' : text.slice(start, end < 0 ? undefined : end).replace(/\s+/g, ' ');
  const status = para.slice(para.indexOf('Status:') + 'Status:'.length).trim();
  if (!para.includes('Status:')) return { base: undefined, relations: [] };
  const base = /^accepted\b/.test(status)
    ? 'accepted'
    : /^superseded by\b/.test(status)
      ? 'superseded'
      : undefined;
  const relations = [...status.matchAll(RELATION)].map((m) => ({
    kind: m[1]!.toLowerCase(),
    other: m[2]!,
    target: m[3]!,
  }));
  return { base, relations };
}

/**
 * What is wrong with the ADRs' Status lines and the index (docs/README.md): `adrs` maps each ADR's file name to its
 * text. Every ADR says whether it holds; every relation links the ADR its number names and is written on both
 * sides; the index line of each ADR shows its status and every relation.
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
function adrProblems(adrs: ReadonlyMap<string, string>, index: string): string[] {
  const problems: string[] = [];
  const byNumber = new Map([...adrs.keys()].map((f) => [f.slice(0, 4), f] as const));
  const statuses = new Map([...adrs].map(([f, text]) => [f.slice(0, 4), adrStatus(text)] as const));
  const indexLines = index.split('\n');
  for (const [n, { base, relations }] of statuses) {
    if (!base) problems.push(`${n}: no Status line saying accepted or superseded by`);
    if (base === 'superseded' && !relations.some((r) => r.kind === 'superseded by'))
      problems.push(`${n}: superseded, but by no linked ADR`);
    const line = indexLines.find((l) => l.startsWith(`- [${n}](adr/${byNumber.get(n)})`));
    if (!line) problems.push(`${n}: not in the index`);
    else if (base && !line.toLowerCase().includes(base))
      problems.push(`${n}: the index does not say ${base}`);
    for (const { kind, other, target } of relations) {
      if (target !== byNumber.get(other)) problems.push(`${n}: ${kind} ADR ${other} links ${target}`);
      const back = statuses.get(other)?.relations.some((r) => r.kind === INVERSE[kind] && r.other === n);
      if (!back) problems.push(`${n}: ${kind} ADR ${other}, which does not say ${INVERSE[kind]} ADR ${n}`);
      const shown = line?.toLowerCase().includes(kind) && line.includes(`(adr/${byNumber.get(other)})`);
      if (line && !shown) problems.push(`${n}: the index does not say ${kind} ${other}`);
    }
  }
  return problems;
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
      for (const c of citations(text)) {
        if (NOT_CITATIONS.some((n) => n.file === file && n.re.test(c.text))) continue;
        found.push(`${file}:${c.line}: ${c.what}: ${c.text}`);
      }
    }
    expect(found).toEqual([]);
  });

  it('no markdown file and no code comment cites an issue by its bare number', () => {
    const found: string[] = [];
    let comments = 0;
    for (const [file, text] of texts) {
      if (text === undefined) continue;
      if (CODE.test(file)) comments += commentLines(text).length;
      for (const c of bareNumbers(file, text)) found.push(`${file}:${c.line}: ${c.what}: ${c.text}`);
    }
    expect(found).toEqual([]);
    expect(comments).toBeGreaterThan(2000); // the comments really are read
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

  it('every ADR says whether it holds, names what changed it on both sides, and the index says the same', () => {
    const adrs = new Map(
      files
        .filter((f) => /^docs\/adr\/\d{4}-.+\.md$/.test(f))
        .map((f) => [f.slice('docs/adr/'.length), readFileSync(join(ROOT, f), 'utf8')] as const),
    );
    const relations = [...adrs.values()].flatMap((t) => adrStatus(t).relations);
    expect(relations.length).toBeGreaterThan(30); // the Status lines really are read
    expect(adrProblems(adrs, readFileSync(join(ROOT, 'docs/README.md'), 'utf8'))).toEqual([]);
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
    ['a design section', ` * Error policy (${DESIGN_DOC} ${S}3.4): a permanent error`],
    ['a spec section', `// The routing table (reference spec ${S}3)`],
    ['a bare section number', ` * Conformance ${S}9.2 item 8`],
    ['the design file', `see ${DESIGN_DOC}.md for the decisions`],
    ['a path outside', `import spec from '../${OUTSIDE}/reference/x.md';`],
    ['the design file by path', ` * as ../${OUTSIDE}/${DESIGN_DOC}.md says`],
    ['the era of the original source', ` * nat-gateway.sh as shipped in the ${SEED}-era`],
    ['a defect code in a test title', `  it('writes the finalizer first (${'D'}3)', async () => {`],
    ['defect codes in a list', `are permanent errors (${'D'}1, ${'D'}9, ${'D'}20)`],
    ['a defect code leading a comment', `  // ${'D'}25: an address from a foreign subnet`],
    ['a bold defect code', `defect **${'D'}6**`],
    ['a range of defect codes', `the deletion defects (${'D'}5–${'D'}8) are fixed`],
    ['defect codes with a slash', `see ${'D'}5/${'D'}6 in the list`],
    ['the design document by its bare name', ` * the error policy of ${DESIGN_DOC} (retry or reject)`],
    ['the outside folder by a relative path', `the reference in ../${OUTSIDE} says so`],
    ['the outside folder, nested', ` * see ../../${OUTSIDE}/reference/kube-ovn-gateway/`],
    ['the outside folder at the end of a sentence', `as in ../${OUTSIDE}.`],
    ['the instructions', ` * Gateway pods restart like the ${BRIEF} says`],
    ['the instructions by file name', `see ${BRIEF.toUpperCase()}-COMMON.md`],
    ['an issue number', `against goals of ≤ 6 and ≤ 3 (${ISSUE} 11). Every handler`],
    [
      'an issue number leading a sentence',
      `Context: ${ISSUE[0]!.toUpperCase()}${ISSUE.slice(1)} 8 asks for Powertools`,
    ],
    ['several issue numbers', `as ${ISSUE}s 8 and 11 ask`],
    ['an issue number with a hash', ` * fixed for ${ISSUE} ${HASH}9`],
    ['an issue number in a test title', `describe('gateway truth on the local stack (${ISSUE} 12)', () => {`],
    ['an issue number possessive', `inside ${ISSUE} 11's end-to-end goals`],
    ['the issue as a source of goals', `/** The ${ISSUE}'s goals, checked on this run's numbers. */`],
    ['the issue asking', `What the ${ISSUE} asks of Powertools is added here`],
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
    ['a link to our own shared/ README', '- [bridge](../shared/bridge/README.md): routing table'],
    ['an upstream issue by its repository', ` * kube-ovn fixed this later (kubeovn/kube-ovn${HASH}4987)`],
    ['an issue of kube-ovn named as such', `a node reboot (kube-ovn ${ISSUE} 4987)`],
    ['an upstream issue', `the upstream ${ISSUE} 4987 describes it`],
    [
      'the word brief',
      ` # one replica (a second one would only double every event, so a ${BRIEF} overlap is harmless)`,
    ],
    ['an issuer', 'bridgeOidcIssuer: oidc.eks.eu-west-1.amazonaws.com/id/AB'],
    ['the word design in prose', 'the previous design, a snapshot written 50 ms after a change'],
  ];
  it.each(innocent)('leaves %s alone', (_what, line) => {
    expect(citations(line)).toEqual([]);
  });

  // A bare number in prose: planted in markdown and in the comments of code, next to the same characters in code
  // where they are not prose (strings, regex and template literals) and must be left alone.
  const N = `${HASH}9`;
  // Each case: where, the file it is planted in, the text after a first line, and the one line that must be found.
  it.each([
    ['markdown', 'docs/x.md', `Fixed in ${N}, see there.`, 2],
    ['a line comment', 'shared/x.ts', `const a = 1; // fixed in ${N}\n`, 2],
    [
      'a block comment after a template literal',
      'test/x.ts',
      `const t = \`\${a} // ${N}\`;\n/* see ${N} */\n`,
      3,
    ],
    ['a comment after a regex literal', 'local/x.ts', `const re = /\\/\\/ ${N}/;\nf(); // ${N} again\n`, 3],
    ['a comment after a division of a name', 'bench/x.ts', `const r = a / 2; // ${N}\n`, 2],
    ['a comment after a division of a number', 'bench/x.ts', `const r = 10 / 2; // ${N}\n`, 2],
    ['a comment after a division of a call', 'bench/x.ts', `const r = f() / 2; // ${N}\n`, 2],
    ['a comment after a nested template', 'scripts/x.ts', `const t = \`\${\`\${x}\`} ${N}\`; // ${N}\n`, 2],
    ['a multi-line block comment', 'functions/x.ts', `/**\n * one\n * fixed in ${N}\n */`, 4],
  ] as const)('catches a bare number in %s', (_what, file, text, line) => {
    expect(bareNumbers(file, `first\n${text}`)).toEqual([expect.objectContaining({ line })]);
  });

  it.each([
    ['a string', 'test/x.ts', `expect(s.requests).toEqual(['GET /x ${N}', 'PATCH /y ${HASH}2']);`],
    ['a template literal', 'test/x.ts', `const id = \`a1${N}\`; const u = \`\${x} ${N}\`;`],
    ['a regex literal', 'shared/x.ts', `const re = /a ${N}/; const b = x.replace(/${N}/g, '');`],
    ['a YAML comment', 'infra/x.yml', `${HASH}1 replica`],
    ['an upstream reference in a comment', 'shared/x.ts', `// kubeovn/kube-ovn${N}`],
    ['a heading anchor in markdown', 'docs/x.md', `[x](${HASH}2-title) and &${HASH}160;`],
  ])('leaves the same characters in %s alone', (_what, file, text) => {
    expect(bareNumbers(file, text)).toEqual([]);
  });

  it('reads the comments of a source with their line numbers', () => {
    const src = ['/** one', ' * two */', "const s = '// not a comment';", 'const r = /\\/*x/; // three'].join(
      '\n',
    );
    expect(commentLines(src)).toEqual([
      { line: 1, text: '/** one' },
      { line: 2, text: ' * two */' },
      { line: 4, text: '// three' },
    ]);
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

describe('the ADR status check', () => {
  const adr = (n: string, status: string) =>
    [`${n}-x.md`, `# ${n}. X\n\nDate: 2026-12-01. Status: ${status}\n\nContext: x\n`] as const;
  const good = new Map([
    adr('0001', 'accepted. Amended by [ADR 0002](0002-x.md) (what).'),
    adr('0002', 'accepted. Amends [ADR 0001](0001-x.md) (what).'),
    adr('0003', 'superseded by [ADR 0004](0004-x.md) (what).'),
    adr('0004', 'accepted. Supersedes [ADR 0003](0003-x.md) (what).'),
  ]);
  const index = [
    '- [0001](adr/0001-x.md) X. *accepted; amended by [0002](adr/0002-x.md)*.',
    '- [0002](adr/0002-x.md) X. *accepted; amends [0001](adr/0001-x.md)*.',
    '- [0003](adr/0003-x.md) X. *superseded by [0004](adr/0004-x.md)*.',
    '- [0004](adr/0004-x.md) X. *accepted; supersedes [0003](adr/0003-x.md)*.',
  ].join('\n');

  it('accepts Status lines written on both sides and an index that shows them', () => {
    expect(adrProblems(good, index)).toEqual([]);
  });

  it.each([
    [
      'a relation written on one side only',
      '0002',
      'accepted.',
      ['0001: amended by ADR 0002, which does not say amends ADR 0001'],
    ],
    [
      'a link to another ADR than the number says',
      '0002',
      'accepted. Amends [ADR 0001](0004-x.md) (what).',
      ['0002: amends ADR 0001 links 0004-x.md'],
    ],
    [
      'no Status line',
      '0004',
      'proposed. Supersedes [ADR 0003](0003-x.md) (what).',
      ['0004: no Status line saying accepted or superseded by'],
    ],
    [
      'superseded by nothing',
      '0003',
      'superseded by ADR 0004 (not linked). Amended by [ADR 0004](0004-x.md).',
      [
        '0003: superseded, but by no linked ADR',
        '0003: amended by ADR 0004, which does not say amends ADR 0003',
        '0003: the index does not say amended by 0004',
        '0004: supersedes ADR 0003, which does not say superseded by ADR 0004',
      ],
    ],
  ])('finds %s', (_what, n, status, problems) => {
    const adrs = new Map(good);
    const [file, text] = adr(n, status);
    adrs.set(file, text);
    expect(adrProblems(adrs, index)).toEqual(problems);
  });

  it('finds an index line that leaves out a status or a relation', () => {
    const stale = index
      .replace('*accepted; amended by [0002](adr/0002-x.md)*', '*accepted*')
      .replace('*superseded by [0004](adr/0004-x.md)*', '*replaced*');
    expect(adrProblems(good, stale)).toEqual([
      '0001: the index does not say amended by 0002',
      '0003: the index does not say superseded',
      '0003: the index does not say superseded by 0004',
    ]);
    expect(adrProblems(good, index.split('\n').slice(1).join('\n'))).toEqual(['0001: not in the index']);
  });
});
