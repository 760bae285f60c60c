import { ApiFailure, describeFailure } from '../api';

/**
 * A failure, announced (role=alert) in words a person can act on: the envelope's message, with a
 * clearer sentence for `forbidden` and `cross_site_request` (api.ts, describeFailure), then each
 * problem the service named, under the form's own name for its field when `field` knows the path.
 * Renders nothing for no error.
 */
export function ErrorBanner({ error, field }: { error: unknown; field?: (path: string) => string | undefined }) {
  if (!error) return null;
  const requestId = error instanceof ApiFailure ? error.requestId : null;
  const details = error instanceof ApiFailure ? error.details : [];
  return (
    <div class="banner banner-error" role="alert">
      <p>{describeFailure(error)}</p>
      {details.length > 0 && (
        <ul class="banner-details">
          {details.map((d, i) => (
            <li key={i}>
              {field?.(d.path) ?? d.path.replace(/^\/body\//, '')}: {d.message}
            </li>
          ))}
        </ul>
      )}
      {requestId && <p class="banner-detail">Request id: {requestId}</p>}
    </div>
  );
}
