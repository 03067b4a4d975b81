/**
 * apimachinery's name and label syntax checks, with its exact messages (they surface in kubectl output as
 * `... is invalid: metadata.name: Invalid value: "X": <message>`).
 */

function regexError(msg: string, fmt: string, ...examples: string[]): string {
  if (examples.length === 0) return `${msg} (regex used for validation is '${fmt}')`;
  let out = `${msg} (e.g. `;
  examples.forEach((e, i) => {
    if (i > 0) out += ' or ';
    out += `'${e}', `;
  });
  return `${out}regex used for validation is '${fmt}')`;
}

const maxLen = (n: number): string => `must be no more than ${n} characters`;

const QUALIFIED_NAME_FMT = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const QUALIFIED_NAME_RE = new RegExp(`^${QUALIFIED_NAME_FMT}$`);
const QUALIFIED_NAME_MSG =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

const LABEL_VALUE_FMT = `(${QUALIFIED_NAME_FMT})?`;
const LABEL_VALUE_RE = new RegExp(`^${LABEL_VALUE_FMT}$`);
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

const DNS1123_LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_LABEL_RE = new RegExp(`^${DNS1123_LABEL_FMT}$`);
const DNS1123_LABEL_MSG =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN_RE = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);
const DNS1123_SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/** Problems of a DNS-1123 subdomain (object names, label key prefixes). */
export function dns1123SubdomainProblems(value: string): string[] {
  const out: string[] = [];
  if (value.length > 253) out.push(maxLen(253));
  if (!DNS1123_SUBDOMAIN_RE.test(value))
    out.push(regexError(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, 'example.com'));
  return out;
}

/** Problems of a DNS-1123 label (namespace names). */
export function dns1123LabelProblems(value: string): string[] {
  const out: string[] = [];
  if (value.length > 63) out.push(maxLen(63));
  if (!DNS1123_LABEL_RE.test(value))
    out.push(regexError(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, 'my-name', '123-abc'));
  return out;
}

/** Problems of a name used as a URL path segment (names of kinds without stricter rules). */
export function pathSegmentProblems(value: string): string[] {
  if (value === '.' || value === '..') return [`may not be '${value}'`];
  const out: string[] = [];
  for (const bad of ['/', '%']) if (value.includes(bad)) out.push(`may not contain '${bad}'`);
  return out;
}

/** Problems of a qualified name (`[prefix/]name`): label keys, finalizers. */
export function qualifiedNameProblems(value: string): string[] {
  const parts = value.split('/');
  let name: string;
  const out: string[] = [];
  if (parts.length === 1) {
    name = parts[0] as string;
  } else if (parts.length === 2) {
    const prefix = parts[0] as string;
    name = parts[1] as string;
    if (prefix.length === 0) out.push('prefix part must be non-empty');
    else for (const m of dns1123SubdomainProblems(prefix)) out.push(`prefix part ${m}`);
  } else {
    return [
      `a qualified name ${regexError(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, 'MyName', 'my.name', '123-abc')} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  if (name.length === 0) out.push('name part must be non-empty');
  else if (name.length > 63) out.push(`name part ${maxLen(63)}`);
  if (name.length > 0 && !QUALIFIED_NAME_RE.test(name)) {
    out.push(
      `name part ${regexError(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, 'MyName', 'my.name', '123-abc')}`,
    );
  }
  return out;
}

export function labelKeyProblem(key: string): string | undefined {
  return qualifiedNameProblems(key)[0];
}

export function labelValueProblem(value: string): string | undefined {
  if (value.length > 63) return maxLen(63);
  if (!LABEL_VALUE_RE.test(value))
    return regexError(LABEL_VALUE_MSG, LABEL_VALUE_FMT, 'MyValue', 'my_value', '12345');
  return undefined;
}
