/** localStorage of the panel's origin when it works, else memory: blocked storage must not break the window. */
export function createStorage() {
  const memory = new Map<string, string>();
  return {
    get(key: string): string | null {
      try {
        const v = localStorage.getItem(key);
        if (v !== null) return v;
      } catch {
        // blocked (third-party storage off, private mode): memory only
      }
      return memory.get(key) ?? null;
    },
    set(key: string, value: string) {
      memory.set(key, value);
      try {
        localStorage.setItem(key, value);
      } catch {
        // blocked: memory only
      }
    },
    remove(key: string) {
      memory.delete(key);
      try {
        localStorage.removeItem(key);
      } catch {
        // blocked
      }
    },
  };
}

export type PanelStorage = ReturnType<typeof createStorage>;
