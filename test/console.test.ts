import { existsSync, mkdirSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import { mintVisionToken } from '@voxgate/protocol';
import { chromium, type Browser, type Page } from 'playwright-core';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from './support/gateway-harness.js';
import { EVERYTHING_BIN } from './support/hub.js';
import { ReferenceDevice } from './support/reference-device.js';
import { llmModels } from './support/assistant.js';
import { startLlmServer } from './support/llm-server.js';

/**
 * The web console end to end: the gateway serves the built console at /console, Debian's Chromium (driven
 * by playwright-core) uses it like a person. Every wait is on a selector or an event, never a sleep.
 * Screenshots of each main view go to test-results/console/ for review.
 */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SHOTS = 'test-results/console';

let browser: Browser;
beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`);
  if (!existsSync('console/dist/index.html')) throw new Error('console/dist is missing: npm run build');
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}, 60_000);
afterAll(async () => {
  await browser?.close();
});

/** Re-check until it holds: the page updates asynchronously (a busy machine gets plenty of time). */
const until = <T>(f: () => T | Promise<T>) => expect.poll(f, { timeout: 20_000, interval: 50 });

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function gateway(overrides: Parameters<typeof startTestGateway>[0] = {}): Promise<TestGateway> {
  const t = await startTestGateway(overrides);
  cleanup.push(() => t.close());
  return t;
}

async function openPage(t: TestGateway, viewport = { width: 1280, height: 860 }): Promise<Page> {
  const context = await browser.newContext({ viewport, colorScheme: 'light' });
  cleanup.push(() => context.close());
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  cleanup.push(() => expect(errors, 'uncaught errors in the page').toEqual([]));
  await page.goto(`${t.baseUrl}/console/`);
  return page;
}

/** Sign in with the keyboard only: the key field has focus order and a label. */
async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key').focus();
  await page.keyboard.type(key);
  await page.keyboard.press('Enter');
}

/** Every form control on the page has an accessible name (runs in the page: given as text, the tests have no DOM types). */
async function unlabelledControls(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(`[...document.querySelectorAll('input, select, textarea')]
    .filter((c) => !(c.labels && c.labels.length > 0) && !c.getAttribute('aria-label') && !c.closest('label'))
    .map((c) => c.outerHTML.slice(0, 120))`);
}

const LIGHT = {
  name: 'self.light.set',
  description: 'Set the light',
  properties: {
    brightness: { type: 'integer' as const, minimum: 0, maximum: 100, default: 50 },
    on: { type: 'boolean' as const },
    label: { type: 'string' as const, default: 'desk' },
  },
  run: (args: Record<string, boolean | number | string>) => ({ brightness: args['brightness'], on: args['on'], label: args['label'] }),
};
const MOTOR = {
  name: 'self.motor.spin',
  description: 'Spin the motor',
  run: () => {
    throw new Error('motor stalled');
  },
};
const REBOOT = { name: 'self.reboot', description: 'Reboot the device', userOnly: true, run: () => true };

describe('console', () => {
  it('serves the page with a strict CSP, deep links fall back to it, and a wrong key shows UNAUTHORIZED', async () => {
    const t = await gateway();
    const res = await fetch(`${t.baseUrl}/console/devices/aa:bb:cc:dd:ee:ff`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(await res.text()).toContain('<div id="app">');
    const index = await fetch(`${t.baseUrl}/console/`);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(await index.text())?.[1];
    const asset = await fetch(`${t.baseUrl}${script}`);
    expect([asset.status, asset.headers.get('cache-control')]).toEqual([200, 'public, max-age=31536000, immutable']);

    const page = await openPage(t);
    await signIn(page, 'not-the-key-0123456789');
    await until(() => page.locator('.problem[data-code="UNAUTHORIZED"]').count()).toBe(1);
    await page.screenshot({ path: `${SHOTS}/sign-in.png` });
    // The key is kept in the tab's session storage only, never in local storage, a cookie or the URL.
    await page.getByLabel('API key').fill(TEST_API_KEY);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Devices' }).waitFor();
    expect(await page.evaluate(`[sessionStorage.getItem('voxgate.apiKey'), localStorage.length, document.cookie, location.href]`)).toEqual([
      TEST_API_KEY,
      0,
      '',
      `${t.baseUrl}/console/`,
    ]);
  }, 60_000);

  it('says how to build it when console/dist is missing, and is gone when turned off', async () => {
    const unbuilt = await gateway({ console: { dir: '/nonexistent/console-dist' } });
    for (const path of ['/console', '/console/', '/console/devices']) {
      const res = await unbuilt.api<{ code: string; detail: string }>('GET', path, undefined, { apiKey: null });
      expect([res.status, res.body.code, res.body.detail]).toEqual([404, 'NOT_FOUND', 'the console is not built: run "npm run build"']);
    }
    const off = await gateway({ console: { enabled: false } });
    expect((await off.api<{ code: string; detail: string }>('GET', '/console/', undefined, { apiKey: null })).body.detail).toBe('no route GET /console/');
  });

  it('a device comes online live; its generated form calls a tool; a device error shows its problem code; events stream, pause and resume', async () => {
    const t = await gateway({
      metrics: { historyIntervalMs: 200 },
      mcp: { servers: { everything: { command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] } } },
    });
    const page = await openPage(t);
    await signIn(page, TEST_API_KEY);

    // No device yet: the empty state names this gateway's real OTA URL, and says a loopback address reaches no device.
    await until(() => page.locator('.ota-url').textContent()).toBe(`${t.baseUrl}/xiaozhi/ota/`);
    expect(await page.locator('[data-testid="loopback-hint"]').textContent()).toContain("127.0.0.1 is this computer's loopback address");
    expect(await page.locator('.lan-url').textContent()).toBe(`http://192.168.1.20:${new URL(t.baseUrl).port}/xiaozhi/ota/`);
    await page.screenshot({ path: `${SHOTS}/devices-empty.png` });
    await page.locator('.stream.live').waitFor();

    const d = new ReferenceDevice({ deviceId: '02:00:00:00:c0:01', firmwareVersion: '2.1.0', boardName: 'sim-board', tools: [LIGHT, MOTOR, REBOOT] });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;

    // It appears without a reload, highlighted as new, with its firmware and tool count.
    const row = page.locator(`tr[data-device="${d.deviceId}"]`);
    await row.and(page.locator('tr.fresh')).waitFor();
    await until(() => row.locator('td').allTextContents()).toEqual(expect.arrayContaining(['online', 'WebSocket', '2.1.0sim-board', '3', '0']));
    await page.screenshot({ path: `${SHOTS}/devices.png` });

    await row.getByRole('link', { name: d.deviceId }).click();
    await page.getByRole('heading', { name: `Device ${d.deviceId}` }).waitFor();
    await until(() => page.locator('.firmware').textContent()).toBe('2.1.0');
    const light = page.locator(`article[data-tool="${LIGHT.name}"]`);
    await light.waitFor();
    // The form follows the schema: an integer field with its range and default, a checkbox, a text field.
    const brightness = light.getByLabel('brightness');
    expect([...(await Promise.all(['type', 'min', 'max', 'step'].map((a) => brightness.getAttribute(a)))), await brightness.inputValue()]).toEqual([
      'number',
      '0',
      '100',
      '1',
      '50',
    ]);
    expect(await light.getByLabel('on').getAttribute('type')).toBe('checkbox');
    expect(await page.locator(`article[data-tool="${REBOOT.name}"] .badge`).textContent()).toBe('user-only');
    expect(await unlabelledControls(page)).toEqual([]);

    await brightness.fill('70');
    await light.getByLabel('on').check();
    await light.getByRole('button', { name: `Call ${LIGHT.name}` }).click();
    await light.locator('[data-testid="call-result"] .duration').waitFor();
    // A JSON result is shown indented, not on one line.
    const shown = (await light.locator('[data-testid="call-result"] pre.text').textContent()) ?? '';
    expect(shown).toContain('\n  "brightness": 70');
    expect(JSON.parse(shown)).toEqual({ brightness: 70, on: true, label: 'desk' });
    // What reached the device: typed arguments, not form strings.
    const sent = d.mcpReceived.find((p) => p['method'] === 'tools/call' && (p['params'] as { name?: string }).name === LIGHT.name);
    expect((sent?.['params'] as { arguments?: unknown }).arguments).toEqual({ brightness: 70, on: true, label: 'desk' });

    const motor = page.locator(`article[data-tool="${MOTOR.name}"]`);
    await motor.getByRole('button', { name: `Call ${MOTOR.name}` }).click();
    const problem = motor.locator('.problem[data-code="DEVICE_ERROR"]');
    await problem.waitFor();
    expect(await problem.textContent()).toContain('The device answered with an error');
    expect(await problem.textContent()).toContain('motor stalled');
    await page.screenshot({ path: `${SHOTS}/device.png`, fullPage: true });

    // Events: a device notification appears live; paused, the stream misses nothing: resume replays it.
    await page.getByRole('link', { name: 'Events' }).click();
    await page.getByRole('heading', { name: 'Events' }).waitFor();
    const notifications = page.locator('tr[data-event-type="device.notification"]');
    d.notify('notifications/state_changed', { state: 'listening' });
    await notifications.first().waitFor();
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.locator('.stream.paused').waitFor();
    const missed = t.nextEvent('device.notification', d.deviceId);
    d.notify('notifications/state_changed', { state: 'speaking' });
    await missed;
    expect(await notifications.count()).toBe(1);
    await page.getByRole('button', { name: 'Resume' }).click();
    await until(() => notifications.count()).toBe(2);
    await page.locator('.stream.live').waitFor();
    await page.screenshot({ path: `${SHOTS}/events.png` });

    // Hosted servers: state, tools, resources and prompts of a real stdio server.
    await t.gw.hubStarted;
    await page.getByRole('link', { name: 'Servers' }).click();
    await page.locator('article[data-server="everything"] .badge.ok').waitFor();
    await until(async () => (await page.locator('ul.names li').count()) > 3).toBe(true);
    await page.screenshot({ path: `${SHOTS}/servers.png`, fullPage: true });

    // Health: counts and charts from the gateway's in-memory samples (one every 200 ms here).
    await page.getByRole('link', { name: 'Health' }).click();
    await until(() => page.locator('.online-count').textContent()).toBe('1');
    await page.locator('figure.chart').first().waitFor();
    expect(await page.locator('figure.chart').count()).toBe(3);
    await page.screenshot({ path: `${SHOTS}/health.png` });

    // Offline: greyed in the table, live.
    const offline = t.nextEvent('device.offline', d.deviceId);
    d.terminate();
    await offline;
    await page.getByRole('link', { name: 'Devices' }).click();
    await page.locator(`tr.offline[data-device="${d.deviceId}"]`).waitFor();
    // Filters: the server filters by status; the search box within the page.
    await page.getByLabel('Status').selectOption('true');
    await page.getByText('No device on this page matches.').waitFor();
    await page.getByLabel('Status').selectOption('false');
    await page.locator(`tr.offline[data-device="${d.deviceId}"]`).waitFor();
    await page.getByLabel('Search this page').fill('no-such-board');
    await page.getByText('No device on this page matches.').waitFor();
    await page.getByLabel('Search this page').fill('sim-board');
    await page.locator(`tr[data-device="${d.deviceId}"]`).waitFor();
  }, 120_000);

  it('is usable on a phone: no sideways scrolling, the device table keeps its key columns', async () => {
    const t = await gateway();
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:c0:02', tools: [LIGHT] });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    const page = await openPage(t, { width: 390, height: 844 });
    await signIn(page, TEST_API_KEY);
    await page.locator(`tr[data-device="${d.deviceId}"]`).waitFor();
    expect(await page.evaluate('document.documentElement.scrollWidth <= document.documentElement.clientWidth')).toBe(true);
    await page.screenshot({ path: `${SHOTS}/devices-phone.png`, fullPage: true });
  }, 60_000);

  it('approves a device waiting for enrollment', async () => {
    const t = await gateway({ deviceAuth: 'hmac', deviceSecret: 'console-device-secret-0123456789' });
    const device = { deviceId: '02:00:00:00:c0:03', clientId: '6f1c5a8e-4a2b-4c1e-9a7d-0c5e2b3f4a10' };
    const check = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': device.deviceId, 'client-id': device.clientId, 'content-type': 'application/json', 'user-agent': 'sim-board/1.7.6' },
      body: JSON.stringify({ application: { name: 'xiaozhi', version: '1.7.6' } }),
    });
    const code = ((await check.json()) as { activation?: { code: string } }).activation?.code;
    expect(code).toMatch(/^\d{6}$/);
    // A device still provisioned for an open gateway dials in without a token: refused, and shown as such.
    const stranded = new ReferenceDevice({ deviceId: '02:00:00:00:c0:04' });
    await expect(stranded.connectWebSocket(t.wsUrl)).rejects.toMatchObject({ statusCode: 401 });

    const page = await openPage(t);
    await signIn(page, TEST_API_KEY);
    // The device's own page (it never connected) finds its code through the listing's device filter, in any spelling.
    await page.evaluate(`location.hash = '#/devices/${device.deviceId.toUpperCase().replace(/:/g, '-')}'`);
    await page.locator(`section[aria-labelledby="enroll-h"] li[data-code="${code}"]`).waitFor();
    await page.getByRole('link', { name: 'Enrollments' }).click();
    const item = page.locator(`li[data-code="${code}"]`);
    await item.waitFor();
    const refused = page.locator('tr[data-refused="02:00:00:00:c0:04"]');
    await refused.waitFor();
    expect(await refused.textContent()).toMatch(/websocket.*missing_token/);
    await page.screenshot({ path: `${SHOTS}/enrollments.png` });
    await item.getByRole('button', { name: `Approve ${device.deviceId} (code ${code})` }).click();
    await until(() => page.getByRole('status').filter({ hasText: 'Approved' }).count()).toBe(1);
    await item.waitFor({ state: 'detached' });
    const binding = await t.api<{ via: string }>('GET', `/v1/enrollments/devices/${device.deviceId}`);
    expect(binding.body.via).toBe('approve');
  }, 60_000);

  it('the assistant panel: a streamed turn with a tool call on a bound device, a confirmation approved; the device page shows its photos and firmware offer', async () => {
    const llm = await startLlmServer();
    cleanup.push(() => llm.close());
    const DOOR = { name: 'self.door.lock', description: 'Lock the door', run: () => ({ locked: true }) };
    const t = await gateway({
      assistant: { models: llmModels(llm), defaultModel: 'oa', confirmTools: [DOOR.name] },
      ota: { firmwareVersion: '2.2.0', firmwareUrl: 'https://fw.example.com/devkit-2.2.0.bin' },
    });
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:c0:04', firmwareVersion: '2.1.0', boardName: 'sim-board', tools: [LIGHT, DOOR] });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await Promise.all([ready, t.gw.hubStarted]);

    const page = await openPage(t);
    await signIn(page, TEST_API_KEY);
    await page.goto(`${t.baseUrl}/console/#/devices/${d.deviceId}`);
    await page.getByRole('heading', { name: `Device ${d.deviceId}` }).waitFor();
    // Firmware: what it runs and what its next OTA check would be offered (the fleet baseline here).
    const firmware = page.locator('[data-testid="firmware-offer"]');
    await firmware.waitFor();
    expect([
      await firmware.getAttribute('data-source'),
      await firmware.locator('.fw-running').textContent(),
      await firmware.locator('.fw-offer').textContent(),
    ]).toEqual(['baseline', '2.1.0', '2.2.0']);
    // Photos: none yet; one the device uploads for a vision question appears live, with alt text.
    await page.getByText('No photo yet.', { exact: false }).waitFor();
    const form = new FormData();
    form.append('question', 'what is on the desk?');
    form.append('file', new Blob([new Uint8Array(png(64, 48))], { type: 'image/png' }), 'camera.png');
    const token = mintVisionToken(t.gw.visionKey, d.deviceId, Date.now() / 1000 + 60);
    const upload = await fetch(`${t.baseUrl}/mcp/vision/explain`, {
      method: 'POST',
      headers: { 'device-id': d.deviceId, authorization: `Bearer ${token}` },
      body: form,
    });
    expect(upload.status).toBe(200);
    const photo = page.locator('ul.photos img');
    await photo.waitFor();
    expect(await photo.getAttribute('alt')).toContain('what is on the desk?');
    await until(() => photo.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(64);
    expect(await unlabelledControls(page)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/device-photos-firmware.png`, fullPage: true });

    // Chat with this device: a tool call streams its progress line, then the answer.
    llm.script([
      { toolCalls: [{ name: 'self_light_set', arguments: { brightness: 70, on: true } }] },
      { text: 'The light is at 70.' },
      { toolCalls: [{ name: 'self_door_lock', arguments: {} }] },
      { text: 'The door is locked.' },
    ]);
    await page.getByRole('link', { name: 'Chat with this device' }).click();
    await page.getByRole('heading', { name: 'Assistant' }).waitFor();
    expect(await page.getByLabel('Device').inputValue()).toBe(d.deviceId);
    expect(await page.getByLabel('Model').inputValue()).toBe('oa');
    await page.getByLabel('Message').fill('set the light to 70');
    await page.keyboard.press('Enter');
    const lightLine = page.locator('li.tool-line[data-tool-call="self_light_set"]');
    await lightLine.and(page.locator('[data-state="ok"]')).waitFor();
    expect(await lightLine.textContent()).toContain('completed in');
    await until(() => page.locator('[data-testid="assistant-text"]').last().textContent()).toBe('Assistant: The light is at 70.');
    // The turn is over: Cancel is gone.
    await page.getByRole('button', { name: 'Cancel' }).waitFor({ state: 'detached' });
    const lit = d.mcpReceived.find((m) => m['method'] === 'tools/call' && (m['params'] as { name?: string }).name === LIGHT.name);
    expect((lit?.['params'] as { arguments?: unknown }).arguments).toEqual({ brightness: 70, on: true });
    // The model was offered the bound device's tools under short names, on the OpenAI wire format.
    expect(llm.requests[0]!.api).toBe('openai');
    expect(llm.requests[0]!.tools).toContain('self_light_set');
    await page.screenshot({ path: `${SHOTS}/assistant.png`, fullPage: true });

    // A tool that needs a person's yes: the turn waits until Approve, then the device runs it.
    await page.getByLabel('Message').fill('lock the door');
    await page.getByRole('button', { name: 'Send' }).click();
    const approve = page.getByRole('button', { name: 'Approve self_door_lock' });
    await approve.waitFor();
    await page.getByRole('button', { name: 'Cancel' }).waitFor();
    expect(d.mcpReceived.some((m) => (m['params'] as { name?: string } | undefined)?.name === DOOR.name)).toBe(false);
    await page.screenshot({ path: `${SHOTS}/assistant-confirm.png`, fullPage: true });
    await approve.click();
    await page.locator('li.confirm .badge.ok').waitFor();
    const doorLine = page.locator('li.tool-line[data-tool-call="self_door_lock"][data-state="ok"]');
    await doorLine.waitFor();
    // The gateway's time includes the person's wait: the line takes it out and says so.
    expect(await doorLine.locator('.waited').textContent()).toMatch(/after \d+\.\d s waiting for your answer, not counted/);
    await until(() => page.locator('[data-testid="assistant-text"]').last().textContent()).toBe('Assistant: The door is locked.');
    expect(d.mcpReceived.some((m) => (m['params'] as { name?: string } | undefined)?.name === DOOR.name)).toBe(true);
    // One conversation: the second turn's request carries the first exchange.
    const roles = (llm.requests[2]!.body['messages'] as Array<{ role: string }>).map((m) => m.role);
    expect(roles.filter((r) => r === 'assistant').length).toBeGreaterThanOrEqual(1);
    expect(await unlabelledControls(page)).toEqual([]);
  }, 120_000);

  it('the assistant panel cancels a running turn, and says how to configure a model when none is', async () => {
    const llm = await startLlmServer();
    cleanup.push(() => llm.close());
    const t = await gateway({ assistant: { models: llmModels(llm), defaultModel: 'oa' } });
    await t.gw.hubStarted;
    llm.script(() => ({ hang: true }));
    const page = await openPage(t);
    await signIn(page, TEST_API_KEY);
    await page.getByRole('link', { name: 'Assistant' }).click();
    await page.getByLabel('Message').fill('tell me a long story');
    await page.keyboard.press('Enter');
    await until(() => llm.requests.length).toBe(1);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.locator('li.end[data-outcome="cancelled"]').waitFor();
    await llm.requests[0]!.aborted;
    expect(await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' })).toBe(1);

    // Cancelled while a tool runs: its line says so, never "Calling tool…" for good.
    const d = new ReferenceDevice({
      deviceId: '02:00:00:00:c0:06',
      tools: [{ name: 'self.slow', description: 'Never answers', run: () => new Promise(() => undefined) }],
    });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    llm.script([{ toolCalls: [{ name: 'device_call', arguments: { device_id: d.deviceId, tool: 'self.slow' } }] }]);
    await page.getByLabel('Message').fill('run the slow tool');
    await page.keyboard.press('Enter');
    const slow = page.locator('li.tool-line[data-tool-call="device_call"]');
    await slow.and(page.locator('[data-state="running"]')).waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await slow.and(page.locator('[data-state="cancelled"]')).waitFor();
    expect(await slow.textContent()).toContain('not finished: the turn was cancelled');

    const bare = await gateway();
    const empty = await openPage(bare);
    await signIn(empty, TEST_API_KEY);
    await empty.getByRole('link', { name: 'Assistant' }).click();
    await empty.locator('[data-testid="no-model"]').waitFor();
    expect(await empty.getByRole('heading', { name: 'No assistant model is configured' }).count()).toBe(1);
    await empty.screenshot({ path: `${SHOTS}/assistant-empty.png` });
  }, 120_000);
});

describe('console, live', () => {
  const WIPE = {
    name: 'self.storage.wipe',
    description: 'Erase every recording',
    annotations: { destructiveHint: true },
    run: () => ({ wiped: true }),
  };
  const REPORT = {
    name: 'self.report',
    description: 'A long JSON report',
    run: () => Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`sensor${i}`, i])),
  };

  it('times tick; a dropped event stream shows devices as unknown under a banner; tools first and searchable; a destructive tool asks first; long JSON folds; hosted tools are callable', async () => {
    const t = await gateway({ mcp: { servers: { everything: { command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] } } } });
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:c1:01', tools: [LIGHT, WIPE, REPORT] });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await Promise.all([ready, t.gw.hubStarted]);

    const page = await openPage(t);
    // The sign-in page says where a generated key is kept.
    expect(await page.locator('.key-where').textContent()).toContain('data/secrets.json');
    await signIn(page, TEST_API_KEY);
    const row = page.locator(`tr[data-device="${d.deviceId}"]`);
    await row.waitFor();
    await page.locator('.stream.live').waitFor();

    // "Last seen 1s ago" moves on by itself.
    const seen = row.locator('time');
    const first = await seen.textContent();
    await until(() => seen.textContent()).not.toBe(first);

    // The stream drops (every reconnection refused): a banner, and "online" is no longer claimed.
    await page.route('**/v1/events', (route) => route.abort());
    await page.getByRole('link', { name: 'Events' }).click();
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.locator('.stream.retrying').waitFor();
    await page.getByRole('link', { name: 'Devices' }).click();
    const banner = page.locator('[data-testid="stream-banner"]');
    await banner.waitFor();
    expect(await banner.textContent()).toContain('device states are unknown until it is back');
    await until(() => row.locator('td .badge').first().textContent()).toBe('unknown (was online)');
    await page.screenshot({ path: `${SHOTS}/devices-stream-down.png` });
    // Back: live again, the banner gone, the device online.
    await page.unroute('**/v1/events');
    await page.locator('.stream.live').waitFor();
    await banner.waitFor({ state: 'detached' });
    await until(() => row.locator('td .badge').first().textContent()).toBe('online');

    // The device page: its tools come before everything else, with a search.
    await row.getByRole('link', { name: d.deviceId }).click();
    const wipe = page.locator(`article[data-tool="${WIPE.name}"]`);
    await wipe.waitFor();
    const [toolsY, factsY] = await Promise.all([page.locator('#tools-h').boundingBox(), page.locator('#facts-h').boundingBox()]);
    expect(toolsY!.y).toBeLessThan(factsY!.y);
    await page.getByLabel('Search tools').fill('erase');
    await until(() => page.locator('article.tool').count()).toBe(1);
    await page.getByLabel('Search tools').fill('');
    await until(() => page.locator('article.tool').count()).toBe(3);

    // A destructive tool: the first click asks; "Don't run" runs nothing, "Run" runs it once.
    expect(await wipe.locator('.badge').textContent()).toContain('destructive');
    await wipe.getByRole('button', { name: `Call ${WIPE.name}` }).click();
    const ask = wipe.getByRole('alertdialog');
    await ask.waitFor();
    await page.screenshot({ path: `${SHOTS}/device-destructive-confirm.png` });
    await ask.getByRole('button', { name: "Don't run" }).click();
    await ask.waitFor({ state: 'detached' });
    const wipes = () => d.mcpReceived.filter((m) => m['method'] === 'tools/call' && (m['params'] as { name?: string }).name === WIPE.name).length;
    expect(wipes()).toBe(0);
    await wipe.getByRole('button', { name: `Call ${WIPE.name}` }).click();
    await wipe.getByRole('button', { name: `Run ${WIPE.name}` }).click();
    await wipe.locator('[data-testid="call-result"]').waitFor();
    expect(wipes()).toBe(1);

    // A long JSON result is indented and folded.
    const report = page.locator(`article[data-tool="${REPORT.name}"]`);
    await report.getByRole('button', { name: `Call ${REPORT.name}` }).click();
    const fold = report.locator('[data-testid="call-result"] details.fold');
    await fold.waitFor();
    expect(await fold.locator('summary').textContent()).toContain('42 lines: show all');
    await fold.locator('summary').click();
    expect(await fold.locator('pre').textContent()).toContain('"sensor39": 39');

    // A hosted server's tool, called from the Servers page (POST /v1/tools/{name}/call).
    await page.getByRole('link', { name: 'Servers' }).click();
    const server = page.locator('article[data-server="everything"]');
    await server.locator('.badge.ok').waitFor();
    await server.locator('details.server-tools > summary').click();
    const echo = server.locator('article[data-tool="mcp__everything__echo"]');
    await echo.getByLabel('message').fill('hello from the console');
    await echo.getByRole('button', { name: 'Call mcp__everything__echo' }).click();
    await until(() => echo.locator('[data-testid="call-result"] pre').first().textContent()).toContain('hello from the console');
    expect(await unlabelledControls(page)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/servers-tool-call.png`, fullPage: true });
  }, 120_000);

  it('MCP endpoints: a token is created and shown once, a tool process dials in with it, its tool is called, the token is revoked', async () => {
    const t = await gateway();
    await t.gw.hubStarted;
    const page = await openPage(t);
    await signIn(page, TEST_API_KEY);
    await page.getByRole('link', { name: 'Endpoints' }).click();
    await page.getByRole('heading', { name: 'MCP endpoints' }).waitFor();
    await page.getByText('No endpoint yet.').waitFor();
    await page.getByLabel('Name').fill('calc');
    await page.getByRole('button', { name: 'Create token' }).click();
    const url = (await page.locator('.created-token .endpoint-url').textContent()) ?? '';
    expect(url).toMatch(new RegExp(`^ws://127\\.0\\.0\\.1:${new URL(t.baseUrl).port}/mcp_endpoint/mcp/\\?token=[A-Za-z0-9_-]{20,}$`));
    const card = page.locator('article[data-endpoint="calc"]');
    await until(() => card.locator('.badge').textContent()).toBe('waiting for its tool process');
    await page.screenshot({ path: `${SHOTS}/endpoints-created.png`, fullPage: true });

    // A tool process (as mcp_pipe.py does: the gateway is its MCP client) dials in with the URL.
    const pipe = fakeToolProcess(url);
    cleanup.push(() => pipe.close());
    await until(() => card.locator('.badge').textContent()).toBe('connected');
    await page.getByRole('link', { name: 'Servers' }).click();
    const server = page.locator('article[data-server="calc"]');
    await server.locator('details.server-tools > summary').click();
    const add = server.locator('article[data-tool="mcp__calc__add"]');
    await add.getByLabel(/^a\b/).fill('2');
    await add.getByLabel(/^b\b/).fill('40');
    await add.getByRole('button', { name: 'Call mcp__calc__add' }).click();
    await until(() => add.locator('[data-testid="call-result"] pre').first().textContent()).toBe('42');

    await page.getByRole('link', { name: 'Endpoints' }).click();
    await card.getByRole('button', { name: 'Revoke…' }).click();
    await card.getByRole('button', { name: 'Revoke calc' }).click();
    await card.waitFor({ state: 'detached' });
    expect((await t.api<{ endpoints: unknown[] }>('GET', '/v1/mcp/endpoints')).body.endpoints).toEqual([]);
    await pipe.closed;
  }, 90_000);

  it("a device's conversation appears live as a chat; its voice mode is set from its page", async () => {
    const t = await gateway();
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:c1:02', tools: [LIGHT] });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    const page = await openPage(t);
    await signIn(page, TEST_API_KEY);
    await page.goto(`${t.baseUrl}/console/#/devices/${d.deviceId}`);
    const mode = page.getByLabel('Voice mode');
    await mode.waitFor();
    expect(await mode.inputValue()).toBe('');
    await mode.selectOption('converse');
    await until(() => page.locator('.effective-mode strong').textContent()).toBe('converse');
    const settings = await t.api<{ voiceMode: string | null }>('PATCH', `/v1/devices/${d.deviceId}`, {});
    expect(settings.body.voiceMode).toBe('converse');

    // The events a conversing device's turn publishes (voice/converse), as the gateway's bus carries them.
    await page.locator('.stream.live').waitFor();
    const session = { session: 'sess-1' };
    t.gw.bus.publish('voice.transcript', d.deviceId, { ...session, text: 'turn the light on' });
    t.gw.bus.publish('voice.tool', d.deviceId, { ...session, phase: 'call', name: 'self.light.set' });
    const heard = page.locator('li[data-voice="heard"]');
    await heard.waitFor();
    expect(await heard.locator('.text').textContent()).toBe('turn the light on');
    const tool = page.locator('li[data-voice="tool"]');
    await until(() => tool.textContent()).toContain('Calling tool self.light.set…');
    t.gw.bus.publish('voice.tool', d.deviceId, { ...session, phase: 'result', name: 'self.light.set', isError: false, durationMs: 31 });
    t.gw.bus.publish('voice.reply', d.deviceId, {
      ...session,
      text: 'The light is on.',
      outcome: 'answered',
      timings: { asrMs: 210, llmFirstTokenMs: 380, firstAudioMs: 520, totalMs: 1400 },
    });
    await until(() => tool.textContent()).toContain('self.light.set completed in 31 ms');
    const reply = page.locator('li[data-voice="reply"]');
    await reply.waitFor();
    expect([await reply.locator('.text').textContent(), await reply.locator('.timings').textContent()]).toEqual([
      'The light is on.',
      'speech recognised 210 ms · first token 380 ms · first audio 520 ms · total 1400 ms',
    ]);
    await page.screenshot({ path: `${SHOTS}/device-conversation.png`, fullPage: true });
    // The Conversations page: every device's, with the device named.
    await page.getByRole('link', { name: 'Conversations' }).click();
    await page.locator('li[data-voice="reply"] a.who').filter({ hasText: d.deviceId }).waitFor();
    expect(await page.locator('li[data-voice]').count()).toBe(3);
    await page.screenshot({ path: `${SHOTS}/conversations.png` });
  }, 60_000);

  it("fleet pages on this gateway read the real routes: jobs, schedules, history first, a device's queued calls", async () => {
    const t = await gateway();
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:c1:03', tools: [LIGHT] });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    const page = await openPage(t);
    await signIn(page, TEST_API_KEY);
    for (const [link, empty] of [
      ['Jobs', 'No job yet.'],
      ['Schedules', 'No schedule yet.'],
    ] as const) {
      await page.getByRole('link', { name: link }).click();
      await until(() => page.getByText(empty).count()).toBe(1);
      expect(await page.locator('.not-available').count()).toBe(0);
    }
    // The events page starts with the persisted history (the device's own events are in it).
    await page.getByRole('link', { name: 'Events' }).click();
    await until(() => page.locator('.history-state').getAttribute('data-state')).toBe('loaded');
    // A call queued through the API shows on the device page, with its state.
    const queued = await t.api<{ id: string }>('POST', `/v1/devices/${d.deviceId}/calls`, { tool: 'self.light.set', arguments: { brightness: 40 } });
    expect(queued.status).toBe(202);
    await page.goto(`${t.baseUrl}/console/#/devices/${d.deviceId}`);
    await page.locator('[data-testid="queued-calls"] > summary').click();
    await until(() => page.locator(`[data-call="${queued.body.id}"]`).count()).toBe(1);
    expect(await page.locator('[data-testid="queued-calls"] .not-available').count()).toBe(0);
  }, 60_000);
});

describe('console, fleet pages against the contract (FLEET-API.md)', () => {
  /*
   * The fleet routes are built elsewhere; until they are merged, the browser's requests to them are answered
   * by a stand-in that follows the contract's shapes (what the pages send is recorded and checked), while
   * every other request reaches the real gateway. Fleet events are published on the real bus.
   */
  it('names, rooms and tags; queued calls; a job with live progress and per-device results; a schedule; history first on the events page', async () => {
    const t = await gateway();
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:c1:04', tools: [LIGHT] });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    const page = await openPage(t);
    const fleet = await fakeFleet(page, d.deviceId);
    await signIn(page, TEST_API_KEY);

    // Names, rooms and tags: edited on the device page, shown and filtered in the list.
    await page.goto(`${t.baseUrl}/console/#/devices/${d.deviceId}`);
    await page.getByLabel('Name', { exact: true }).fill('Kitchen speaker');
    await page.getByLabel('Room', { exact: true }).fill('kitchen');
    await page.getByLabel('Tags', { exact: true }).fill('speaker, floor-1 bad/tag');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('tag "bad/tag": 1-32 letters, digits, _ . : -').waitFor();
    await page.getByLabel('Tags', { exact: true }).fill('speaker, floor-1');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('.meta-form .ok').waitFor();
    expect(fleet.patches).toEqual([{ name: 'Kitchen speaker', room: 'kitchen', tags: ['speaker', 'floor-1'] }]);
    await page.getByRole('link', { name: 'Devices', exact: true }).click();
    const row = page.locator(`tr[data-device="${d.deviceId}"]`);
    await until(() => row.locator('.device-name').textContent()).toBe('Kitchen speaker');
    expect(await row.locator('td.meta').textContent()).toBe('kitchenspeakerfloor-1');
    await page.getByLabel('Tag', { exact: true }).fill('garden');
    await page.getByLabel('Tag', { exact: true }).press('Enter');
    await page.getByText('No device on this page matches.').waitFor();
    expect(fleet.deviceQueries.at(-1)).toBe('garden');
    await page.getByLabel('Tag', { exact: true }).fill('speaker');
    await page.getByLabel('Tag', { exact: true }).press('Enter');
    await row.waitFor();
    await page.screenshot({ path: `${SHOTS}/devices-tags.png` });

    // Queued calls: queue one, see it, cancel it.
    await page.goto(`${t.baseUrl}/console/#/devices/${d.deviceId}`);
    const calls = page.locator('[data-testid="queued-calls"]');
    await calls.locator('summary').first().click();
    await calls.getByLabel('Tool').fill(LIGHT.name);
    await calls.getByLabel('Arguments (JSON object)').fill('{"on": true}');
    await calls.getByRole('button', { name: 'Queue call' }).click();
    const queued = calls.locator('li[data-state="queued"]');
    await queued.waitFor();
    expect(fleet.calls[0]).toMatchObject({ deviceId: d.deviceId, tool: LIGHT.name, arguments: { on: true } });
    await queued.getByRole('button', { name: /^Cancel call/ }).click();
    await calls.locator('li[data-state="cancelled"]').waitFor();

    // A job: created with a filter, progress live from job.progress events, per-device results, cancel.
    await page.getByRole('link', { name: 'Jobs' }).click();
    await page.locator('summary', { hasText: 'New job' }).click();
    await page.getByLabel('Tool', { exact: true }).fill('self.audio_speaker.set_volume');
    await page.getByLabel('Arguments (JSON object)').fill('{"volume": 40}');
    await page.getByRole('button', { name: 'Start job' }).click();
    await page.getByText('filter: name at least one of tags, room, firmware, board or device ids').waitFor();
    await page.getByLabel('Tags', { exact: true }).fill('speaker');
    await page.getByLabel('Abort over % failed').fill('20');
    await page.getByRole('button', { name: 'Start job' }).click();
    await page.getByRole('heading', { name: /^Job / }).waitFor();
    expect(fleet.jobBodies).toEqual([
      { tool: 'self.audio_speaker.set_volume', arguments: { volume: 40 }, filter: { tags: ['speaker'] }, concurrency: 10, abortOverPercent: 20 },
    ]);
    const job = fleet.jobs[0]!;
    await until(() => page.locator('.counts-line').first().textContent()).toContain('0/3');
    fleet.progress(job.id, { queued: 0, sent: 1, succeeded: 1, failed: 1, expired: 0, cancelled: 0 });
    t.gw.bus.publish('job.progress' as never, '', { jobId: job.id, state: 'running', counts: job.counts });
    await until(() => page.locator('.counts-line').first().textContent()).toContain('2/3 · 1 ok · 1 failed');
    await until(() => page.locator('ul.calls li').count()).toBe(3);
    expect(await page.locator('ul.calls li[data-state="failed"]').textContent()).toContain('DEVICE_ERROR');
    await page.screenshot({ path: `${SHOTS}/job.png`, fullPage: true });
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await until(() => page.locator('.facts .badge').first().textContent()).toBe('cancelled');
    await page.getByRole('link', { name: '← Jobs' }).click();
    await page.locator(`tr[data-job="${job.id}"]`).waitFor();

    // A schedule: cron in a time zone, listed with its next run, paused, deleted.
    await page.getByRole('link', { name: 'Schedules' }).click();
    await page.locator('summary', { hasText: 'New schedule' }).click();
    await page.getByLabel('Cron expression').fill('0 7 * * 1-5');
    await page.getByLabel('Time zone').fill('Europe/Berlin');
    await page.getByLabel('Device id').fill(d.deviceId);
    await page.getByLabel('Tool', { exact: true }).fill(LIGHT.name);
    await page.getByRole('button', { name: 'Create schedule' }).click();
    const sched = page.locator('li.schedule');
    await sched.locator('.next-run').waitFor();
    expect(fleet.scheduleBodies).toEqual([{ cron: '0 7 * * 1-5', timeZone: 'Europe/Berlin', call: { device: d.deviceId, tool: LIGHT.name } }]);
    await sched.getByRole('button', { name: 'Pause' }).click();
    await page.locator('li.schedule[data-paused="true"]').waitFor();
    await page.screenshot({ path: `${SHOTS}/schedules.png`, fullPage: true });
    await sched.getByRole('button', { name: 'Delete…' }).click();
    await sched.getByRole('button', { name: 'Delete for good' }).click();
    await page.getByText('No schedule yet.').waitFor();

    // The events page starts with history (oldest kept event first in time, shown newest first), then the live stream.
    await page.getByRole('link', { name: 'Events' }).click();
    await until(() => page.locator('.history-state').getAttribute('data-state')).toBe('loaded');
    await page.locator('tr[data-event-type="device.offline"]').waitFor();
    expect(fleet.historyQueries.at(-1)).toMatch(/^since=[^&]+&limit=200$/);
    expect(await unlabelledControls(page)).toEqual([]);
  }, 120_000);
});

interface FakeJob {
  id: string;
  tool: string;
  arguments: Record<string, unknown>;
  filter: Record<string, unknown>;
  concurrency: number;
  ttlMs: number;
  state: string;
  createdAt: string;
  updatedAt: string;
  counts: Record<string, number>;
  total: number;
}

/** The contract's routes answered in the browser (page.route), the rest passed to the real gateway. */
async function fakeFleet(page: Page, deviceId: string) {
  const now = () => new Date().toISOString();
  let seq = 0;
  const id = () => `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`;
  const meta = { name: null as string | null, room: null as string | null, tags: [] as string[], tenant: null, board: 'sim-board', firstSeenAt: now() };
  const f = {
    patches: [] as unknown[],
    deviceQueries: [] as string[],
    calls: [] as Array<Record<string, unknown>>,
    jobBodies: [] as unknown[],
    jobs: [] as FakeJob[],
    scheduleBodies: [] as unknown[],
    schedules: [] as Array<Record<string, unknown>>,
    historyQueries: [] as string[],
    progress(jobId: string, counts: Record<string, number>) {
      const j = f.jobs.find((x) => x.id === jobId)!;
      j.counts = counts;
    },
  };
  const json = (body: unknown, status = 200) => ({ status, contentType: 'application/json', body: JSON.stringify(body) });
  const notFound = {
    status: 404,
    contentType: 'application/problem+json',
    body: JSON.stringify({ type: 'about:blank', title: 'Not Found', status: 404, code: 'NOT_FOUND', detail: 'no such thing' }),
  };
  await page.route('**/openapi.json', async (route) => {
    const doc = (await (await route.fetch()).json()) as { paths: Record<string, Record<string, unknown>> };
    const op = { responses: {} };
    Object.assign(doc.paths, {
      '/v1/devices/{deviceId}/calls': { get: op, post: op },
      '/v1/calls/{callId}': { get: op, delete: op },
      '/v1/jobs': { get: op, post: op },
      '/v1/jobs/{jobId}': { get: op },
      '/v1/jobs/{jobId}/devices': { get: op },
      '/v1/jobs/{jobId}/cancel': { post: op },
      '/v1/schedules': { get: op, post: op },
      '/v1/schedules/{scheduleId}': { get: op, patch: op, delete: op },
      '/v1/events/history': { get: op },
    });
    const list = doc.paths['/v1/devices']!['get'] as { parameters: Array<{ name: string; in: string }> };
    list.parameters.push(...['tag', 'room', 'name'].map((name) => ({ name, in: 'query' })));
    await route.fulfill(json(doc));
  });
  // The device list and record gain the registry's fields; ?tag= is applied here.
  await page.route(/\/v1\/devices(\?|\/[^/?]+$|\/[^/?]+\?)/, async (route) => {
    const req = route.request();
    const url = new URL(req.url());
    if (req.method() === 'PATCH') {
      const body = req.postDataJSON() as Record<string, unknown>;
      if (!('name' in body || 'room' in body || 'tags' in body)) return route.fallback();
      f.patches.push(body);
      Object.assign(meta, body);
      return route.fulfill(json({ id: deviceId, voiceMode: null, effectiveVoiceMode: 'off', ...meta }));
    }
    if (req.method() !== 'GET') return route.fallback();
    const tag = url.searchParams.get('tag');
    if (tag !== null) f.deviceQueries.push(tag);
    for (const k of ['tag', 'room', 'name']) url.searchParams.delete(k);
    const real = (await (await route.fetch({ url: url.href })).json()) as { devices?: Array<Record<string, unknown>> } & Record<string, unknown>;
    if (!real.devices) return route.fulfill(json({ ...real, ...meta }));
    const devices = real.devices.map((x) => ({ ...x, ...meta })).filter(() => tag === null || tag.split(',').every((t) => meta.tags.includes(t)));
    return route.fulfill(json({ ...real, devices }));
  });
  await page.route(/\/v1\/devices\/[^/]+\/calls/, async (route) => {
    const req = route.request();
    if (req.method() === 'POST') {
      const body = req.postDataJSON() as { tool: string; arguments?: Record<string, unknown> };
      const call = {
        id: id(),
        deviceId,
        tool: body.tool,
        arguments: body.arguments ?? {},
        state: 'queued',
        createdAt: now(),
        updatedAt: now(),
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      };
      f.calls.unshift(call);
      return route.fulfill(json(call, 202));
    }
    return route.fulfill(json({ calls: f.calls }));
  });
  await page.route(/\/v1\/calls\/[^/]+$/, async (route) => {
    const call = f.calls.find((c) =>
      route
        .request()
        .url()
        .endsWith(c['id'] as string),
    );
    if (!call) return route.fulfill(notFound);
    Object.assign(call, { state: 'cancelled', updatedAt: now() });
    return route.fulfill(json(call));
  });
  await page.route(/\/v1\/jobs(\/|\?|$)/, async (route) => {
    const req = route.request();
    const path = new URL(req.url()).pathname;
    if (path === '/v1/jobs' && req.method() === 'POST') {
      const body = req.postDataJSON() as { tool: string; arguments?: Record<string, unknown>; filter: Record<string, unknown>; concurrency?: number };
      f.jobBodies.push(body);
      const job: FakeJob = {
        id: id(),
        tool: body.tool,
        arguments: body.arguments ?? {},
        filter: body.filter,
        concurrency: body.concurrency ?? 10,
        ttlMs: 86_400_000,
        state: 'running',
        createdAt: now(),
        updatedAt: now(),
        counts: { queued: 3, sent: 0, succeeded: 0, failed: 0, expired: 0, cancelled: 0 },
        total: 3,
      };
      f.jobs.unshift(job);
      return route.fulfill(json(job, 202));
    }
    if (path === '/v1/jobs') return route.fulfill(json({ jobs: f.jobs }));
    const [, , , jobId, sub] = path.split('/');
    const job = f.jobs.find((j) => j.id === jobId);
    if (!job) return route.fulfill(notFound);
    if (sub === 'cancel') {
      job.state = 'cancelled';
      return route.fulfill(json(job));
    }
    if (sub === 'devices') {
      const states = job.counts['succeeded'] ? ['succeeded', 'failed', 'sent'] : ['queued', 'queued', 'queued'];
      const devices = states.map((state, i) => ({
        deviceId: `02:00:00:00:d0:0${i}`,
        callId: `call-${i}`,
        state,
        ...(state === 'succeeded' ? { result: { content: [{ type: 'text', text: '{"volume":40}' }], isError: false, durationMs: 12 } } : {}),
        ...(state === 'failed' ? { error: { code: 'DEVICE_ERROR', message: 'speaker busy' } } : {}),
      }));
      return route.fulfill(json({ devices }));
    }
    return route.fulfill(json(job));
  });
  await page.route(/\/v1\/schedules(\/|$)/, async (route) => {
    const req = route.request();
    const path = new URL(req.url()).pathname;
    if (path === '/v1/schedules' && req.method() === 'POST') {
      const body = req.postDataJSON() as Record<string, unknown>;
      f.scheduleBodies.push(body);
      const s = { id: id(), ...body, paused: false, nextRun: new Date(Date.now() + 86_400_000).toISOString(), lastRun: null, createdAt: now() };
      f.schedules.push(s);
      return route.fulfill(json(s, 201));
    }
    if (path === '/v1/schedules') return route.fulfill(json({ schedules: f.schedules }));
    const s = f.schedules.find((x) => path.endsWith(x['id'] as string));
    if (!s) return route.fulfill(notFound);
    if (req.method() === 'DELETE') {
      f.schedules.splice(f.schedules.indexOf(s), 1);
      return route.fulfill({ status: 204 });
    }
    if (req.method() === 'PATCH') Object.assign(s, req.postDataJSON() as Record<string, unknown>);
    return route.fulfill(json(s));
  });
  await page.route(/\/v1\/events\/history/, async (route) => {
    const url = new URL(route.request().url());
    f.historyQueries.push(url.search.slice(1));
    const at = new Date(Date.now() - 600_000).toISOString();
    return route.fulfill(json({ events: [{ id: 'old-1', type: 'device.offline', deviceId, at, data: { reason: 'closed' } }] }));
  });
  return f;
}

/**
 * A tool process as xiaozhi's mcp_pipe.py runs one: it dials the endpoint URL and answers the gateway, which
 * is the MCP client on that connection (initialize, tools/list, tools/call, ping), one JSON-RPC message per text frame.
 */
function fakeToolProcess(url: string): { close: () => void; closed: Promise<void> } {
  const ws = new WebSocket(url);
  const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
  ws.on('message', (raw) => {
    const m = JSON.parse(raw.toString()) as {
      id?: number | string;
      method?: string;
      params?: { protocolVersion?: string; arguments?: { a?: number; b?: number } };
    };
    if (m.id === undefined) return;
    const reply = (result: unknown) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
    if (m.method === 'initialize')
      reply({ protocolVersion: m.params?.protocolVersion ?? '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'calc', version: '1.0.0' } });
    else if (m.method === 'tools/list')
      reply({
        tools: [
          {
            name: 'add',
            description: 'Add two numbers',
            inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
          },
        ],
      });
    else if (m.method === 'tools/call') reply({ content: [{ type: 'text', text: String((m.params?.arguments?.a ?? 0) + (m.params?.arguments?.b ?? 0)) }] });
    else if (m.method === 'ping') reply({});
    else ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'method not found' } }));
  });
  return { close: () => ws.close(), closed };
}

/** A small real PNG (a colour gradient), so the browser decodes and draws it. */
function png(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf: Buffer) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) rows.set([(x * 4) & 0xff, (y * 5) & 0xff, 160], y * (1 + width * 3) + 1 + x * 3);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
