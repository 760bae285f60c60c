/**
 * The Content-Type a stored file is served with. A file loaded by `<script src>`, `<link
 * rel=stylesheet>`, `importScripts` or `WebAssembly.instantiateStreaming` runs with the privileges
 * of the page that loads it, whatever `Content-Disposition` or `CSP: sandbox` say (those apply to
 * documents only); with `nosniff` a browser refuses such a load unless the type is a script, CSS or
 * wasm type. So only types a browser can neither run nor render as an active document are sent as
 * they were declared; every other type (JavaScript under any of its names, wasm, HTML, XHTML, SVG,
 * XML, CSS, and anything unknown) goes out as `application/octet-stream`. The declared type stays
 * in the record and in `attachments[].mimeType`.
 */
const INERT_TYPES = new Set([
  'application/octet-stream',
  'application/pdf',
  'text/plain',
  'text/csv',
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'image/avif',
  'image/bmp',
  'image/heic',
  'image/heif',
  'image/tiff',
  'application/zip',
  'application/gzip',
  'application/x-7z-compressed',
  'application/msword',
  'application/vnd.ms-excel',
  'application/vnd.ms-powerpoint',
  'application/rtf',
]);

/** Office Open XML and OpenDocument files (zip containers a browser only downloads), audio and video. */
const INERT_PREFIXES = ['application/vnd.openxmlformats-officedocument.', 'application/vnd.oasis.opendocument.', 'audio/', 'video/'];

export const OPAQUE_TYPE = 'application/octet-stream';

export function servedContentType(storedType: string): string {
  const type = storedType.toLowerCase();
  if (INERT_TYPES.has(type)) return type;
  // `+xml` subtypes (an SVG or XHTML by another name) render as documents, even under audio/ or video/.
  if (INERT_PREFIXES.some((p) => type.startsWith(p)) && !type.endsWith('+xml') && !type.endsWith('/xml')) return type;
  return OPAQUE_TYPE;
}
