/** Something with a deadline; `seq` breaks ties in the order things were queued. */
export interface Due {
  readonly deadline: number;
  readonly seq: number;
}

/** A binary min-heap on (deadline, seq): the earliest deadline first, and first come first among equals. */
export class DeadlineQueue<T extends Due> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(a[i]!, a[parent]!)) break;
      [a[i], a[parent]] = [a[parent]!, a[i]!];
      i = parent;
    }
  }

  peek(): T | undefined {
    return this.items[0];
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    a[0] = last;
    for (let i = 0; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && before(a[l]!, a[m]!)) m = l;
      if (r < a.length && before(a[r]!, a[m]!)) m = r;
      if (m === i) break;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
    return top;
  }

  /** Everything queued, emptied (in no particular order). */
  drain(): T[] {
    return this.items.splice(0);
  }
}

function before(x: Due, y: Due): boolean {
  return x.deadline < y.deadline || (x.deadline === y.deadline && x.seq < y.seq);
}
