/** MEDIA_STORE and its settings: the defaults, and one line naming the setting for each bad value. */
import { mediaStorageFrom } from '../../server/config';

const s3 = { MEDIA_STORE: 's3', MEDIA_S3_BUCKET: 'chat-media' };

test('local disk is the default and streams', () => {
  expect(mediaStorageFrom({})).toEqual({ store: 'local', download: 'stream' });
  expect(mediaStorageFrom({ MEDIA_DOWNLOAD: 'stream' })).toEqual({ store: 'local', download: 'stream' });
});

test('s3: region us-east-1, virtual-hosted style, no prefix, 10 s time-outs and redirects unless set', () => {
  expect(mediaStorageFrom(s3)).toEqual({
    store: 's3',
    download: 'redirect',
    s3: { bucket: 'chat-media', region: 'us-east-1', endpoint: undefined, forcePathStyle: false, prefix: '', timeoutMs: 10_000 },
  });
  expect(
    mediaStorageFrom({
      ...s3,
      MEDIA_S3_REGION: 'eu-west-1',
      MEDIA_S3_ENDPOINT: 'http://127.0.0.1:9000',
      MEDIA_S3_FORCE_PATH_STYLE: 'true',
      MEDIA_S3_PREFIX: 'chat/media/',
      MEDIA_S3_TIMEOUT_MS: '2000',
      MEDIA_DOWNLOAD: 'stream',
    }),
  ).toEqual({
    store: 's3',
    download: 'stream',
    s3: { bucket: 'chat-media', region: 'eu-west-1', endpoint: 'http://127.0.0.1:9000', forcePathStyle: true, prefix: 'chat/media/', timeoutMs: 2000 },
  });
});

test.each([
  [{ MEDIA_STORE: 'disk' }, 'MEDIA_STORE must be local or s3, got "disk"'],
  [{ MEDIA_DOWNLOAD: 'proxy' }, 'MEDIA_DOWNLOAD must be redirect or stream, got "proxy"'],
  [{ MEDIA_DOWNLOAD: 'redirect' }, 'MEDIA_DOWNLOAD=redirect needs MEDIA_STORE=s3'],
  [{ MEDIA_STORE: 's3' }, 'MEDIA_S3_BUCKET must name the bucket'],
  [{ ...s3, MEDIA_S3_BUCKET: 'Chat_Media' }, 'MEDIA_S3_BUCKET must name the bucket'],
  [{ ...s3, MEDIA_S3_ENDPOINT: 'minio:9000' }, 'MEDIA_S3_ENDPOINT must be an http(s) URL'],
  [{ ...s3, MEDIA_S3_ENDPOINT: 'https://key:secret@minio.example' }, 'MEDIA_S3_ENDPOINT must be an http(s) URL without credentials'],
  [{ ...s3, MEDIA_S3_FORCE_PATH_STYLE: 'yes' }, 'MEDIA_S3_FORCE_PATH_STYLE must be true or false, got "yes"'],
  [{ ...s3, MEDIA_S3_PREFIX: '/media' }, 'MEDIA_S3_PREFIX must be'],
  [{ ...s3, MEDIA_S3_REGION: 'EU West' }, 'MEDIA_S3_REGION must be a region name'],
  [{ ...s3, MEDIA_S3_TIMEOUT_MS: '10' }, 'MEDIA_S3_TIMEOUT_MS must be at least 100'],
])('%j is refused naming the setting', (env, message) => {
  expect(() => mediaStorageFrom(env)).toThrow(message);
});

test('a refusal is one line and never echoes credentials of an endpoint', () => {
  let message = '';
  try {
    mediaStorageFrom({ ...s3, MEDIA_S3_ENDPOINT: 'https://key:secret@minio.example' });
  } catch (err) {
    message = (err as Error).message;
  }
  expect(message).not.toMatch(/\n/);
  expect(message).not.toContain('secret');
});
