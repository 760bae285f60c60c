// The loader's stylesheet is bundled as text (esbuild's `text` loader) and adopted as a
// constructable stylesheet: no <style> element, so the host page needs no 'unsafe-inline'.
declare module '*.css' {
  const text: string;
  export default text;
}
