declare module 'swagger-ui-dist' {
  export function getAbsoluteFSPath(): string;
  const _default: { getAbsoluteFSPath(): string };
  export default _default;
}
