import type { Assistant } from './assistant.js';

/**
 * The assistant as the vision endpoint's explainer: `{explain({question, image})}` answered by the vision
 * model in the xiaozhi shape. Undefined when no model can see, so the endpoint keeps its own default.
 */
export function assistantExplainer(
  assistant: Assistant,
  maxPhotoBytes: number,
): { explain(input: { question: string; image: Buffer }): Promise<{ success: boolean; action: 'RESPONSE'; response: string }> } | undefined {
  if (assistant.visionModelName() === undefined) return undefined;
  return { explain: ({ question, image }) => assistant.explainImage(question, image, maxPhotoBytes) };
}
