import { describe, expect, it } from 'vitest';
import { deviceForgetter, type ForgetDeps } from '../../src/devices/forget.js';

const ID = '02:00:00:00:00:01';

/** Ports that record what was asked of them; each says whether it knew the device. */
function ports(knew: { registry?: boolean; known?: boolean; mode?: boolean; enrolled?: boolean }) {
  const calls: string[] = [];
  const deps: ForgetDeps = {
    registry: { forget: async (id) => (calls.push(`registry ${id}`), knew.registry ?? false) },
    known: () => knew.known ?? false,
    voiceModes: { get: () => (knew.mode ? 'realtime' : undefined), set: async (id, mode) => void calls.push(`mode ${id} ${mode}`) },
    enrollment: { reenroll: async (id) => (calls.push(`reenroll ${id}`), knew.enrolled ?? false) },
    also: [async (id) => calls.push(`queued ${id}`)],
  };
  return { deps, calls };
}

describe('deviceForgetter', () => {
  it('forgets the record, the voice mode, the credentials and what other parts keep, in that order', async () => {
    const { deps, calls } = ports({ registry: true, mode: true, enrolled: true });
    expect(await deviceForgetter(deps)(ID)).toBe(true);
    expect(calls).toEqual([`registry ${ID}`, `mode ${ID} null`, `reenroll ${ID}`, `queued ${ID}`]);
  });

  it('is false when no part knew the device, and still asks every part', async () => {
    const { deps, calls } = ports({});
    expect(await deviceForgetter(deps)(ID)).toBe(false);
    expect(calls).toEqual([`registry ${ID}`, `reenroll ${ID}`, `queued ${ID}`]);
  });

  it('is true when any one part knew it', async () => {
    for (const knew of [{ registry: true }, { known: true }, { mode: true }, { enrolled: true }]) {
      expect(await deviceForgetter(ports(knew).deps)(ID)).toBe(true);
    }
  });

  it('works without enrollment (open device auth) and without other parts', async () => {
    const { deps } = ports({ registry: true });
    expect(await deviceForgetter({ ...deps, enrollment: undefined, also: undefined })(ID)).toBe(true);
  });
});
