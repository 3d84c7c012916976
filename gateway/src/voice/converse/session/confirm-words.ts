/** The words of a spoken confirmation: the question asked, and what counts as yes. */

/** Yes, in the words people use (English and Chinese); anything else, silence included, is a no. */
export function isYes(text: string): boolean {
  const t = text.toLowerCase();
  if (/\b(no|nope|don't|do not|cancel|stop|never)\b|不|别|取消/.test(t)) return false;
  return /\b(yes|yeah|yep|yup|sure|ok|okay|confirm(ed)?|go ahead|do it|please do|affirmative)\b|是|好|确认|可以|对/.test(t);
}

/** The spoken question for a tool that needs a person's yes. */
export function confirmQuestion(tool: string, language: string | undefined): string {
  const what = tool
    .replace(/^self[_.]/, '')
    .replace(/[_.]+/g, ' ')
    .trim();
  if (language?.toLowerCase().startsWith('zh')) return `要执行 ${what} 吗？请说“是”确认。`;
  return `Should I run ${what}? Say yes to confirm.`;
}
