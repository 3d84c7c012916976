import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { builtinTool, evaluate } from '../../src/hub/builtin.js';

/** The hub's built-in calculator: its grammar, its errors, and input that tries to be more than arithmetic. */
describe('the calculator (hub/builtin.ts evaluate)', () => {
  it('follows the usual precedence: unary minus, power (right-assoc), * / %, + -', () => {
    expect(evaluate('(2 + 3) * 4 ^ 2')).toBe(80);
    expect(evaluate('2 ^ 3 ^ 2')).toBe(512);
    expect(evaluate('2 ** 10')).toBe(1024);
    expect(evaluate('-2 ^ 2')).toBe(-4);
    expect(evaluate('7 % 4 + 10 / 4')).toBe(5.5);
    expect(evaluate('sqrt(16) + max(1, 5, 3) + round(2.5)')).toBe(12);
    expect(evaluate('PI')).toBeCloseTo(Math.PI);
    expect(evaluate('1.5e3 + .5')).toBe(1500.5);
  });

  it('agrees with JavaScript on generated sums and products of integers', () => {
    const term = fc.tuple(fc.integer({ min: -1000, max: 1000 }), fc.constantFrom('+', '-', '*'));
    fc.assert(
      fc.property(fc.array(term, { minLength: 1, maxLength: 12 }), fc.integer({ min: -1000, max: 1000 }), (terms, last) => {
        const src = terms.map(([n, op]) => `(${n}) ${op} `).join('') + `(${last})`;
        // The reference: the same text as JavaScript (only integers and + - * here; in the test only).
        const want = new Function(`return ${src}`)() as number;
        expect(evaluate(src)).toBe(want);
      }),
      { numRuns: 300, seed: 7 },
    );
  });

  it('says what is wrong, and never reaches names outside its tables', () => {
    const error = (src: string) => {
      try {
        evaluate(src);
        return '';
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(error('')).toBe('empty expression');
    expect(error('1 / 0')).toBe('division by zero');
    expect(error('5 % 0')).toBe('modulo by zero');
    expect(error('(1 + 2')).toBe('expected ")" at the end');
    expect(error('1 +')).toBe('unexpected end of expression');
    expect(error('sqrt(1, 2)')).toBe('sqrt takes 1 argument(s)');
    expect(error('10 ^ 400')).toBe('the result is not a finite number');
    for (const name of ['constructor', '__proto__', 'toString', 'process', 'require']) {
      expect(error(name)).toBe(`unknown name "${name}"`);
      expect(error(`${name}(1)`)).toBe(`unknown function "${name}"`);
    }
    expect(error('1; 2')).toBe('unexpected ";"');
    expect(error('('.repeat(300) + '1' + ')'.repeat(300))).toBe('expression nested too deeply');
    expect(error('-'.repeat(300) + '1')).toBe('expression nested too deeply');
  });

  it('as a tool: a result with structured content, or an error result the model can read', () => {
    const calc = builtinTool('calculator');
    expect(calc.tool.name).toBe('calculator');
    const ok = calc.run({ expression: '6 * 7' });
    expect(ok).toEqual({ content: [{ type: 'text', text: '42' }], structuredContent: { expression: '6 * 7', value: 42 } });
    expect(calc.run({ expression: '6 / 0' })).toEqual({ content: [{ type: 'text', text: 'cannot evaluate: division by zero' }], isError: true });
    expect(calc.run({ expression: 'x'.repeat(1001) })).toMatchObject({ isError: true });
  });
});
