/**
 * The requests the lab's model of kube-ovn-controller sends (local/controllers/kube-ovn-eip.ts), each one counted by
 * object, kind and outcome, so that a test can say what running beside the product costs kube-ovn: how many
 * requests, how many the API server refused (an admission policy's 403), how many failed otherwise.
 *
 * Requests go out as kube-ovn sends them: status as a merge patch of the whole status from the informer cache on the
 * status subresource, finalizers as a merge patch of the metadata, labels as a JSON patch of /metadata/labels, the
 * spec as an Update of the whole object, and gateway commands as pods/exec in the release's form.
 */
import type { IncomingMessage } from 'node:http';
import { CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import WebSocket from 'ws';
import { GATEWAY_CONTAINER, GROUP, VERSION } from '../../shared/domain/kube-ovn.js';

/** kube-ovn-controller's field manager (client-go names it after the binary). */
export const KUBE_OVN_FIELD_MANAGER = 'kube-ovn-controller';

export type RequestKind =
  | 'status'
  | 'finalizers'
  | 'labels'
  | 'spec'
  | `exec ${string}`
  | 'fip-status'
  | 'fip-labels'
  | 'fip-finalizers';
export type Outcome = 'ok' | 'denied' | 'failed';

export interface RequestRecord {
  /** The object the request is about: an EIP or FIP name (exec: the EIP or FIP it was sent for). */
  object: string;
  kind: RequestKind;
  outcome: Outcome;
  at: number;
}

export class ApiRefused extends Error {
  constructor(
    message: string,
    readonly code: number | undefined,
  ) {
    super(message);
  }
}

/** A command that ran and failed: kube-ovn's `command terminated with exit code N` with its stderr, or stderr alone. */
export class ExecFailed extends Error {
  constructor(
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(exitCode ? `command terminated with exit code ${exitCode}` : stderr);
  }
}

const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const JSON_PATCH = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

function refusal(e: unknown): ApiRefused {
  const x = e as { code?: number; body?: unknown; message?: string };
  let message = x.message ?? String(e);
  const body = typeof x.body === 'string' ? x.body : JSON.stringify(x.body ?? '');
  try {
    const parsed = JSON.parse(body) as { message?: string };
    if (parsed.message) message = parsed.message;
  } catch {
    // not JSON: keep the client's message
  }
  return new ApiRefused(message, x.code);
}

export class KubeOvnClient {
  readonly records: RequestRecord[] = [];
  private readonly custom: CustomObjectsApi;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly namespace: string,
  ) {
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  private record(object: string, kind: RequestKind, outcome: Outcome): void {
    this.records.push({ object, kind, outcome, at: Date.now() });
  }

  /** One request; a 404 is kube-ovn's `IsNotFound → return nil`. */
  private async send(object: string, kind: RequestKind, call: () => Promise<unknown>): Promise<void> {
    try {
      await call();
      this.record(object, kind, 'ok');
    } catch (e) {
      const r = refusal(e);
      if (r.code === 404) {
        this.record(object, kind, 'ok');
        return;
      }
      this.record(object, kind, r.code === 403 ? 'denied' : 'failed');
      throw r;
    }
  }

  private args(plural: string, name: string, body: object) {
    return { group: GROUP, version: VERSION, plural, name, body, fieldManager: KUBE_OVN_FIELD_MANAGER };
  }

  /** `{"status": <whole status>}` as a merge patch on /status (IptablesEipStatus.Bytes()). */
  patchStatus(plural: string, name: string, status: object, kind: RequestKind = 'status'): Promise<void> {
    return this.send(name, kind, () =>
      this.custom.patchClusterCustomObjectStatus(this.args(plural, name, { status }), MERGE),
    );
  }

  /** GenerateMergePatchPayload of the finalizers: `{"metadata":{"finalizers":[…]}}` (`{}` when nothing changed). */
  patchFinalizers(
    plural: string,
    name: string,
    finalizers: string[] | undefined,
    kind: RequestKind = 'finalizers',
  ): Promise<void> {
    const body = finalizers === undefined ? {} : { metadata: { finalizers } };
    return this.send(name, kind, () =>
      this.custom.patchClusterCustomObject(this.args(plural, name, body), MERGE),
    );
  }

  /** updateIptableLabels: `[{"op": <add|replace>, "path": "/metadata/labels", "value": {…}}]`. */
  patchLabels(
    plural: string,
    name: string,
    op: 'add' | 'replace',
    labels: Record<string, string>,
    kind: RequestKind = 'labels',
  ): Promise<void> {
    return this.send(name, kind, () =>
      this.custom.patchClusterCustomObject(
        this.args(plural, name, [{ op, path: '/metadata/labels', value: labels }]),
        JSON_PATCH,
      ),
    );
  }

  /** IptablesEIPs().Update: the whole object, with the spec kube-ovn set. */
  replace(plural: string, name: string, obj: object): Promise<void> {
    return this.send(name, 'spec', () =>
      this.custom.replaceClusterCustomObject(this.args(plural, name, obj)),
    );
  }

  /**
   * execNatGwRules in the vpc-nat-gw container. The lab's gateway simulator runs argv only and refuses `bash -c`
   * (local/natgw); when it refuses the shell form of releases 1.12 to 1.16, the same words are sent again as argv
   * — the admission decision was made on the first request, in the release's own form, and both requests count.
   */
  async exec(object: string, pod: string, op: string, command: string[]): Promise<void> {
    const kind: RequestKind = `exec ${op}`;
    let r = await this.execOnce(pod, command);
    if (r.kind === 'ran' && r.exitCode === 126 && /-c is refused/.test(r.stderr) && command[1] === '-c') {
      this.record(object, kind, 'ok');
      r = await this.execOnce(pod, (command[2] ?? '').split(' ').filter(Boolean));
    }
    if (r.kind === 'refused') {
      this.record(object, kind, r.code === 403 ? 'denied' : 'failed');
      throw new ApiRefused(r.message, r.code || undefined);
    }
    this.record(object, kind, r.exitCode === 0 && r.stderr === '' ? 'ok' : 'failed');
    // kube-ovn 1.12–1.15 take any stderr as a failure; 1.16+ skip `Warning:` lines (not modelled: none are sent here).
    if (r.exitCode !== 0 || r.stderr !== '') throw new ExecFailed(r.exitCode, r.stderr.trim());
  }

  /**
   * One pods/exec over WebSocket (channels 1 stdout, 2 stderr, 3 status). A refused upgrade reads as client-go's
   * remotecommand reads it: the Status in the response body, its message as the error (a StatusError, so kube-ovn logs
   * `pods "<pod>" is forbidden: ValidatingAdmissionPolicy '…' … denied request: …`), else the body itself.
   */
  private async execOnce(
    pod: string,
    argv: string[],
  ): Promise<
    { kind: 'ran'; exitCode: number; stderr: string } | { kind: 'refused'; message: string; code: number }
  > {
    const server = this.kubeConfig.getCurrentCluster()?.server ?? '';
    const url = new URL(`/api/v1/namespaces/${this.namespace}/pods/${pod}/exec`, server);
    url.protocol = url.protocol === 'http:' ? 'ws:' : 'wss:';
    for (const a of argv) url.searchParams.append('command', a);
    url.searchParams.set('container', GATEWAY_CONTAINER);
    url.searchParams.set('stdout', 'true');
    url.searchParams.set('stderr', 'true');
    const opts: WebSocket.ClientOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(opts);
    return new Promise((resolve) => {
      let stderr = '';
      let status: { status?: string; details?: { causes?: { reason?: string; message?: string }[] } } = {};
      const ws = new WebSocket(url, ['v5.channel.k8s.io', 'v4.channel.k8s.io'], opts);
      ws.on('unexpected-response', (_req, res: IncomingMessage) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString();
        });
        res.on('end', () => {
          resolve({ kind: 'refused', message: statusMessage(body), code: res.statusCode ?? 0 });
          ws.terminate();
        });
      });
      ws.on('error', (e) => resolve({ kind: 'refused', message: e.message, code: 0 }));
      ws.on('message', (data: Buffer) => {
        if (data[0] === 2) stderr += data.subarray(1).toString();
        if (data[0] === 3 && data.length > 1)
          status = JSON.parse(data.subarray(1).toString()) as typeof status;
      });
      ws.on('close', () => {
        if (status.status === 'Success') return resolve({ kind: 'ran', exitCode: 0, stderr });
        const code = Number(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message ?? 1);
        resolve({ kind: 'ran', exitCode: Number.isNaN(code) ? 1 : code, stderr });
      });
    });
  }
}

/** A refused upgrade's body: the Status message when it is one, else the body (`unable to upgrade connection: …`). */
function statusMessage(body: string): string {
  try {
    const s = JSON.parse(body) as { kind?: string; message?: string };
    if (s.kind === 'Status' && s.message) return s.message;
  } catch {
    // not a Status
  }
  return `unable to upgrade connection: ${body.trim()}`;
}
