import { describe, expect, it } from 'vitest';
import { ToolCatalog } from '../../src/devices/catalog.js';

const tool = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: `${name} tool`,
  inputSchema: { type: 'object' as const, properties: {} },
  ...extra,
});

/** A device's tool list: immutable, hashed, shared by every device of the same firmware. */
describe('ToolCatalog', () => {
  it('interns identical catalogs: a fleet of one firmware shares one object', () => {
    const a = ToolCatalog.from([tool('self.get_device_status'), tool('self.audio_speaker.set_volume')]);
    const b = ToolCatalog.from([tool('self.get_device_status'), tool('self.audio_speaker.set_volume')]);
    expect(b).toBe(a);
    expect(a.hash).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // Another order or another description is another catalog.
    expect(ToolCatalog.from([tool('self.audio_speaker.set_volume'), tool('self.get_device_status')]).hash).not.toBe(a.hash);
    expect(ToolCatalog.from([tool('self.get_device_status', { description: 'other' }), tool('self.audio_speaker.set_volume')]).hash).not.toBe(a.hash);
  });

  it('keeps the first definition of a repeated name, finds tools by name, and marks user-only tools', () => {
    const c = ToolCatalog.from([
      tool('self.a', { description: 'first' }),
      tool('self.a', { description: 'second' }),
      tool('self.photo', { annotations: { audience: ['user'] } }),
      tool('self.b', { annotations: { destructiveHint: true } }),
    ]);
    expect(c.size).toBe(3);
    expect(c.get('self.a')?.description).toBe('first');
    expect(c.get('self.photo')?.userOnly).toBe(true);
    expect(c.get('self.b')).toMatchObject({ userOnly: false, annotations: { destructiveHint: true } });
    expect(c.get('self.missing')).toBeUndefined();
    expect(c.tools.map((t) => t.name)).toEqual(['self.a', 'self.photo', 'self.b']);
  });

  it('reuses the catalog of a walk of cached pages without hashing again; uncached pages hash', () => {
    const tools = [tool('self.p1'), tool('self.p2')];
    const first = ToolCatalog.fromPages([{ serial: 101 }, { serial: 102 }], tools);
    expect(ToolCatalog.fromPages([{ serial: 101 }, { serial: 102 }], [])).toBe(first);
    expect(ToolCatalog.fromPages([{ serial: 0 }, { serial: 102 }], tools)).toBe(first);
    expect(ToolCatalog.fromPages([{ serial: 0 }], [tool('self.other')]).get('self.other')).toBeDefined();
  });

  it('gathers the tools of a walk only when its pages are not known: a known walk never calls for them', () => {
    const tools = [tool('self.q1'), tool('self.q2')];
    let gathered = 0;
    const gather = () => (gathered++, tools);
    const first = ToolCatalog.fromPages([{ serial: 201 }, { serial: 202 }], gather);
    expect(gathered).toBe(1);
    expect(first.tools.map((t) => t.name)).toEqual(['self.q1', 'self.q2']);
    const never = () => {
      throw new Error('a known walk gathered its tools');
    };
    expect(ToolCatalog.fromPages([{ serial: 201 }, { serial: 202 }], never)).toBe(first);
    // An uncached page: the tools are gathered (and give the same interned catalog).
    expect(ToolCatalog.fromPages([{ serial: 0 }, { serial: 202 }], gather)).toBe(first);
    expect(gathered).toBe(2);
  });
});
