/** The words of a spoken confirmation: the question asked, and what counts as yes. */
import { normalizeDeviceId } from '@voxgate/protocol';

/** Yes, in the words people use (English and Chinese); anything else, silence included, is a no. */
export function isYes(text: string): boolean {
  const t = text.toLowerCase();
  if (/\b(no|nope|don't|do not|cancel|stop|never)\b|不|别|取消/.test(t)) return false;
  return /\b(yes|yeah|yep|yup|sure|ok|okay|confirm(ed)?|go ahead|do it|please do|affirmative)\b|是|好|确认|可以|对/.test(t);
}

/**
 * The spoken question for a call that needs a person's yes: what the yes runs and, when it is another device's tool,
 * on which device. `device_call` is asked as the device tool its arguments name (the hub confirmed it on that target):
 * its own name says neither, so a model steered by a tool result could have a yes to "device call" run anything.
 */
export function confirmQuestion(call: { name: string; arguments: Record<string, unknown> }, language: string | undefined, ownDeviceId: string): string {
  let tool = call.name;
  let device: string | undefined;
  const { tool: named, device_id: id } = call.arguments;
  if (call.name === 'device_call' && typeof named === 'string' && typeof id === 'string') {
    tool = named.slice(0, 128);
    const target = normalizeDeviceId(id) ?? id.slice(0, 64);
    if (target !== ownDeviceId) device = target;
  }
  const what = tool
    .replace(/^self[_.]/, '')
    .replace(/[_.]+/g, ' ')
    .trim();
  if (language?.toLowerCase().startsWith('zh')) return device ? `要在设备 ${device} 上执行 ${what} 吗？请说“是”确认。` : `要执行 ${what} 吗？请说“是”确认。`;
  return `Should I run ${what}${device ? ` on device ${device}` : ''}? Say yes to confirm.`;
}
