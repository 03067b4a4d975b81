/**
 * The local dashboard in a real browser: Debian's chromium, headless, driven by playwright-core. One local stack,
 * one browser. The page must load with no console errors and request nothing but its own loopback origin; show the
 * demo EIP; show a new EIP shortly after it becomes Ready, with the allocation count and the subnet bar moving;
 * and show a handler failure (an injected eip-add failure on the gateway) as a dead letter with its error.
 * Screenshots go to .ci/out/screenshots/ (CI artifacts); with EIP_DASHBOARD_SCREENSHOT=docs the wide one is also
 * written to docs/dashboard.png (the README's).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryLogger } from '../../local/memory/logger.js';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { eventuallyValue } from '../support/eventually.js';

// The callbacks given to page.evaluate/waitForFunction run in the browser; the project's types are Node's only.
interface El {
  textContent: string | null;
  children: ArrayLike<El>;
  tagName: string;
  getAttribute(name: string): string | null;
  blur?(): void;
}
declare const document: {
  querySelector(s: string): El | null;
  querySelectorAll(s: string): Iterable<El>;
  getElementById(id: string): El | null;
  activeElement: El | null;
  documentElement: { scrollWidth: number };
};
declare const window: { innerWidth: number };

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const skip = !existsSync(CHROMIUM);
if (skip)
  console.warn(
    `dashboard-browser: SKIPPED: no chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`,
  );

const root = join(import.meta.dirname, '../..');
const shots = join(root, '.ci/out/screenshots');

let stack: LocalStack;
let dir: string;
let browser: Browser;
let page: Page;
let custom: CustomObjectsApi;
let core: CoreV1Api;
const consoleErrors: string[] = [];
const foreignRequests: string[] = [];

const eip = (name: string) => ({
  apiVersion: 'kubeovn.io/v1',
  kind: 'IptablesEIP',
  metadata: { name },
  spec: { natGwDp: 'gw1' },
});

async function getEip(name: string): Promise<IptablesEip | undefined> {
  return (await custom
    .getClusterCustomObject({ group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips', name })
    .catch(() => undefined)) as IptablesEip | undefined;
}

/** The Allocations widget's total over the window, and the external subnet's used count, as the page shows them. */
async function shown(): Promise<{ allocations: number; used: number }> {
  return page.evaluate(() => {
    const allocations = [...document.querySelectorAll('li[data-metric="Allocations"]')].reduce(
      (n, li) => n + Number(li.getAttribute('data-total') ?? 0),
      0,
    );
    const used = Number(
      document.querySelector('.subnet[data-subnet="ovn-vpc-external-network"]')?.getAttribute('data-used') ??
        -1,
    );
    return { allocations, used };
  });
}

const rowReady = (name: string) =>
  page.waitForFunction(
    (n) => {
      const row = document.querySelector(`#eips tbody tr[data-key="${n}"]`);
      return row && row.children[4]?.textContent === 'yes' && row.children[1]?.textContent !== '—';
    },
    name,
    { polling: 50, timeout: 20_000 },
  );

describe.skipIf(skip)('local dashboard in headless chromium', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'eip-dashboard-'));
    mkdirSync(shots, { recursive: true });
    stack = await startLocalStack({
      kubeconfig: join(dir, 'kubeconfig'),
      log: memoryLogger('error'),
      say: () => {},
      dashboardPort: 0,
      // A failure is parked as a dead letter after one retry, not after the longest lease.
      retries: 1,
      retryBackoffMs: 50,
      retryForMs: 0,
      // The drift check (shared/audit) runs often enough to be seen here.
      driftRepairMs: 2_000,
    });
    const kc = new KubeConfig();
    kc.loadFromFile(stack.kubeconfig);
    custom = kc.makeApiClient(CustomObjectsApi);
    core = kc.makeApiClient(CoreV1Api);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    const origin = new URL(stack.dashboardUrl!).origin;
    page.on('request', (r) => {
      if (!r.url().startsWith(`${origin}/`)) foreignRequests.push(r.url());
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves on loopback with a same-origin-only policy, and loads with no console errors showing the demo EIP', async () => {
    expect(stack.dashboardUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const res = await page.goto(stack.dashboardUrl!);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toMatch(/^default-src 'self'/);
    await rowReady('demo-eip');
    const row = (await page.locator('#eips tbody tr[data-key="demo-eip"]').textContent()) ?? '';
    expect(row).toContain('gw1');
    expect(row).toContain('qos-demo');
    expect(row).toMatch(/172\.18\.0\.\d+/);
    // Charts are drawn by the bundled library (uPlot) into canvases.
    await page.waitForSelector('#widgets .uplot canvas');
    // Keyboard: the first Tab lands on a focusable region of the page.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.tagName)).not.toBe('BODY');
    expect(consoleErrors).toEqual([]);
    expect(foreignRequests).toEqual([]);
    expect((await page.request.post(stack.dashboardUrl!)).status()).toBe(405);
  });

  it('shows a new EIP within 2 s of it becoming Ready; the allocation count and the subnet bar move', async () => {
    const before = await shown();
    expect(before.used).toBeGreaterThan(0);
    const name = 'dash-eip-1';
    const row = rowReady(name).then(() => Date.now());
    await custom.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-eips',
      body: eip(name),
    });
    const readyAt = await eventuallyValue(
      async () => {
        const e = await getEip(name);
        return e?.status?.ready && e.status.ip ? Date.now() : undefined;
      },
      { stepMs: 25, what: `${name} Ready` },
    );
    const rowAt = await row;
    console.log(`dashboard-browser: ${name} row appeared ${Math.max(0, rowAt - readyAt)} ms after Ready`);
    expect(rowAt - readyAt).toBeLessThan(2000);
    await page.waitForFunction(
      (b) => {
        const used = Number(
          document
            .querySelector('.subnet[data-subnet="ovn-vpc-external-network"]')
            ?.getAttribute('data-used'),
        );
        const alloc = [...document.querySelectorAll('li[data-metric="Allocations"]')].reduce(
          (n, li) => n + Number(li.getAttribute('data-total') ?? 0),
          0,
        );
        return used === b.used + 1 && alloc === b.allocations + 1;
      },
      before,
      { polling: 100, timeout: 10_000 },
    );
    expect(consoleErrors).toEqual([]);
  });

  it('shows every gateway pod (namespace, phase, container run, redo token, release) and the pods carrying each EIP', async () => {
    const row = page.locator('#gateway-pods tbody tr[data-key="kube-system/vpc-nat-gw-gw1-0"]');
    await row.waitFor({ timeout: 20_000 });
    const cells = await row.locator('th, td').allTextContents();
    const pod = await core.readNamespacedPod({ name: 'vpc-nat-gw-gw1-0', namespace: 'kube-system' });
    const started = pod.status?.containerStatuses?.find((c) => c.name === 'vpc-nat-gw')?.state?.running
      ?.startedAt;
    expect(cells.slice(0, 6)).toEqual(['vpc-nat-gw-gw1-0', 'gw1', 'kube-system', 'Running', 'running', '0']);
    expect(cells[6]).toBe(new Date(String(started)).toISOString().slice(0, 19));
    expect(cells[7]).toBe(stack.kubeOvnRelease);
    expect(Number(cells[8])).toBeGreaterThanOrEqual(2);
    await page.waitForFunction(
      () =>
        document.querySelector('#eips tbody tr[data-key="demo-eip"]')?.children[6]?.textContent ===
        '1 of 1 pod',
      undefined,
      { polling: 100, timeout: 10_000 },
    );
    expect(consoleErrors).toEqual([]);
  });

  it('shows gateway drift from the last drift check', async () => {
    const ip = (await getEip('dash-eip-1'))?.status?.ip;
    expect(ip).toBeTruthy();
    const gw = stack.api.gateways.get('kube-system', 'vpc-nat-gw-gw1-0');
    expect(gw?.exec(['ip', 'addr', 'del', `${ip}/24`, 'dev', 'net1']).exitCode).toBe(0);
    const row = page.locator('#drift tbody tr[data-key="missing-address/dash-eip-1"]');
    await row.waitFor({ timeout: 20_000 });
    const text = (await row.textContent()) ?? '';
    expect(text).toContain(ip);
    expect(text).toMatch(/done|planned|skipped|failed/);
    // The same check read the EIP's address off the gateway's one pod: its row names the pod that lacks it.
    const eipRow = (await page.locator('#eips tbody tr[data-key="dash-eip-1"]').textContent()) ?? '';
    expect(eipRow).toContain('0 of 1 pod (missing on kube-system/vpc-nat-gw-gw1-0)');
    // The check repairs it: the address is back on the gateway.
    await page.waitForFunction(
      () => /Checked at .*: no drift/.test(document.getElementById('drift-note')?.textContent ?? ''),
      undefined,
      {
        polling: 100,
        timeout: 20_000,
      },
    );
    expect(gw?.net1Addresses().some((a) => a.startsWith(`${ip}/`))).toBe(true);
  });

  it('shows a handler failure as a dead letter with its error', async () => {
    const fault = stack.api.faults.failExec({
      command: 'eip-add',
      exitCode: 1,
      stderr: 'injected: eip-add refused',
      times: Number.POSITIVE_INFINITY,
    });
    try {
      await custom.createClusterCustomObject({
        group: 'kubeovn.io',
        version: 'v1',
        plural: 'iptables-eips',
        body: eip('doomed-eip'),
      });
      const letter = page.locator('#dead-letters tbody tr[data-key="add/doomed-eip"]');
      await letter.waitFor({ timeout: 20_000 });
      const text = (await letter.textContent()) ?? '';
      expect(text).toContain('doomed-eip');
      expect(text).toMatch(/exit|eip-add|injected/i);
      await page.waitForFunction(
        () => /[1-9]\d* dead letter/.test(document.getElementById('status')?.textContent ?? ''),
        undefined,
        {
          timeout: 5_000,
        },
      );
      expect(fault.hits).toBeGreaterThanOrEqual(2);
      await page.screenshot({ path: join(shots, 'dashboard-wide.png'), fullPage: true });
      await page.evaluate(() => document.activeElement?.blur?.());
      if (process.env.EIP_DASHBOARD_SCREENSHOT === 'docs')
        await page.screenshot({ path: join(root, 'docs/dashboard.png'), fullPage: true });
    } finally {
      fault.cancel();
    }
    expect(consoleErrors).toEqual([]);
    expect(foreignRequests).toEqual([]);
  });

  it('works on a narrow window: nothing wider than the viewport', async () => {
    await page.setViewportSize({ width: 380, height: 800 });
    // One more poll after the resize, so the charts have been redrawn at the new width.
    const status = await page.locator('#status').textContent();
    await page.waitForFunction((old) => document.getElementById('status')?.textContent !== old, status, {
      timeout: 10_000,
    });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await page.screenshot({ path: join(shots, 'dashboard-narrow.png'), fullPage: true });
    expect(overflow).toBeLessThanOrEqual(0);
    expect(consoleErrors).toEqual([]);
  });
});

describe('npm start and the dashboard options', () => {
  const start = (...args: string[]) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', join(root, 'scripts/start.ts'), ...args], {
      cwd: root,
    }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({
        code: e.code,
        stdout: e.stdout,
        stderr: e.stderr,
      }),
    );

  it('--help names the dashboard on the ready: line and its options', async () => {
    const r = await start('--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('dashboard=http://127.0.0.1:PORT/');
    expect(r.stdout).toContain('--dashboard-port N');
    expect(r.stdout).toContain('--no-dashboard');
  });

  it('a bad --dashboard-port is a usage error (exit 2)', async () => {
    const r = await start('--dashboard-port', 'eighty');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--dashboard-port must be a port number');
    const both = await start('--no-dashboard', '--dashboard-port', '8080');
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('exclude each other');
  });
});
