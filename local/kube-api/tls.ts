/**
 * The local API's serving certificate: a CA and a server certificate for the loopback names, made at start with
 * node:crypto (ECDSA P-256) and a small DER encoder, so that nothing is stored and no tool is needed. TLS matters
 * because kubectl sends credentials only to an https server (clientcmd adds the user's auth info only when the
 * server URL's scheme is https); the kubeconfigs the API writes carry this CA.
 */
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { isIP } from 'node:net';

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
}

const seq = (...c: Buffer[]) => tlv(0x30, ...c);
const set = (...c: Buffer[]) => tlv(0x31, ...c);
const octets = (b: Buffer) => tlv(0x04, b);
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'));
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]));
const explicit = (n: number, c: Buffer) => tlv(0xa0 + n, c);

function integer(b: Buffer): Buffer {
  let v = b;
  while (v.length > 1 && v[0] === 0 && ((v[1] as number) & 0x80) === 0) v = v.subarray(1);
  if (((v[0] as number) & 0x80) !== 0) v = Buffer.concat([Buffer.from([0]), v]);
  return tlv(0x02, v);
}

function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split('.').map(Number);
  const out = [a * 40 + b];
  for (const n of rest) {
    const chunk: number[] = [n & 0x7f];
    for (let v = n >> 7; v > 0; v >>= 7) chunk.unshift((v & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

/** A BIT STRING of whole bytes (a signature: no unused bits). */
function bytes(b: Buffer): Buffer {
  return tlv(0x03, Buffer.from([0]), b);
}

/** A BIT STRING of named flags (one byte), its trailing zero bits marked unused as DER wants. */
function flags(b: number): Buffer {
  let unused = 0;
  while (unused < 7 && (b & (1 << unused)) === 0) unused++;
  return tlv(0x03, Buffer.from([b === 0 ? 0 : unused, b]));
}

function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(2, 14);
  return tlv(0x17, Buffer.from(`${iso}Z`, 'ascii'));
}

const name = (cn: string, org?: string) =>
  seq(...(org ? [set(seq(oid('2.5.4.10'), utf8(org)))] : []), set(seq(oid('2.5.4.3'), utf8(cn))));

const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));
}

function altNames(hosts: readonly string[]): Buffer {
  return seq(
    ...hosts.map((h) => {
      const family = isIP(h);
      if (family === 4) return tlv(0x87, Buffer.from(h.split('.').map(Number)));
      if (family === 6) return tlv(0x87, ipv6Bytes(h));
      return tlv(0x82, Buffer.from(h, 'ascii'));
    }),
  );
}

function ipv6Bytes(ip: string): Buffer {
  const [head = '', tail = ''] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = ip.includes('::') && tail ? tail.split(':') : [];
  const groups = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.from(
    groups.flatMap((g) => [(Number.parseInt(g, 16) >> 8) & 0xff, Number.parseInt(g, 16) & 0xff]),
  );
}

function keyId(spki: Buffer): Buffer {
  return createHash('sha1').update(spki).digest();
}

function certificate(o: {
  subject: Buffer;
  issuer: Buffer;
  spki: Buffer;
  signer: KeyObject;
  extensions: Buffer[];
}): Buffer {
  const now = Date.now();
  const serial = randomBytes(16);
  serial[0] = ((serial[0] as number) & 0x7f) | 0x01;
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))),
    integer(serial),
    ECDSA_SHA256,
    o.issuer,
    seq(time(new Date(now - 3600_000)), time(new Date(now + 10 * 365 * 86_400_000))),
    o.subject,
    o.spki,
    explicit(3, seq(...o.extensions)),
  );
  const signature = sign('sha256', tbs, { key: o.signer, dsaEncoding: 'der' });
  return seq(tbs, ECDSA_SHA256, bytes(signature));
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n');
  return `-----BEGIN ${label}-----\n${b64.replace(/\n$/, '')}\n-----END ${label}-----\n`;
}

export interface ServingCertificate {
  /** PEM of the CA that signed the server certificate (what a kubeconfig's certificate-authority-data carries). */
  ca: string;
  cert: string;
  key: string;
}

/** A fresh CA and a server certificate for `hosts` (IP addresses and DNS names), valid for ten years. */
export function servingCertificate(hosts: readonly string[]): ServingCertificate {
  const caKeys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const caSpki = caKeys.publicKey.export({ type: 'spki', format: 'der' });
  const caName = name('local-kube-api-ca', 'eip-lambdas lab');
  const caDer = certificate({
    subject: caName,
    issuer: caName,
    spki: caSpki,
    signer: caKeys.privateKey,
    extensions: [
      extension('2.5.29.19', true, seq(bool(true))),
      extension('2.5.29.15', true, flags(0x86)),
      extension('2.5.29.14', false, octets(keyId(caSpki))),
    ],
  });
  const keys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = keys.publicKey.export({ type: 'spki', format: 'der' });
  const der = certificate({
    subject: name('local-kube-api'),
    issuer: caName,
    spki,
    signer: caKeys.privateKey,
    extensions: [
      extension('2.5.29.19', true, seq()),
      extension('2.5.29.15', true, flags(0x80)),
      extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))),
      extension('2.5.29.35', false, seq(tlv(0x80, keyId(caSpki)))),
      extension('2.5.29.17', false, altNames(hosts)),
    ],
  });
  return {
    ca: pem('CERTIFICATE', caDer),
    cert: pem('CERTIFICATE', der),
    key: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
