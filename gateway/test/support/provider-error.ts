import { expect } from 'vitest';
import { ProviderError } from '../../src/voice/converse/contracts.js';

/** The ProviderError `p` rejects with (the test fails if it resolves, or rejects with anything else). */
export async function providerRejection(p: Promise<unknown>): Promise<ProviderError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ProviderError);
  return e as ProviderError;
}
