import { HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import type { TestContext } from 'node:test';

/**
 * The S3 server the checkpoint tests and bench use: the AWS environment variables when set,
 * else what scripts/s3/start.sh starts (S3Proxy on 127.0.0.1:9000, its default credentials).
 */
export function s3Env(): NodeJS.ProcessEnv {
  const e = process.env;
  return {
    AWS_ENDPOINT_URL: e.AWS_ENDPOINT_URL_S3 || e.AWS_ENDPOINT_URL || 'http://127.0.0.1:9000',
    AWS_ACCESS_KEY_ID: e.AWS_ACCESS_KEY_ID || 'shardflow',
    AWS_SECRET_ACCESS_KEY: e.AWS_SECRET_ACCESS_KEY || 'shardflow-secret',
    AWS_REGION: e.AWS_REGION || 'us-east-1',
  };
}

/** The bucket they write under (scripts/s3/start.sh creates `shardflow`). */
export const S3_BUCKET = process.env.SHARDFLOW_S3_BUCKET || 'shardflow';

/** A raw client of that server, for what a test does behind the checkpoint store's back. */
export function rawS3Client(): S3Client {
  const env = s3Env();
  return new S3Client({
    endpoint: env.AWS_ENDPOINT_URL,
    region: env.AWS_REGION,
    forcePathStyle: true,
    credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID!, secretAccessKey: env.AWS_SECRET_ACCESS_KEY! },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** Why the S3 server cannot be used (no answer, bad credentials, no bucket), or undefined. */
export async function s3Unavailable(): Promise<string | undefined> {
  const client = rawS3Client();
  try {
    await client.send(new HeadBucketCommand({ Bucket: S3_BUCKET }), { abortSignal: AbortSignal.timeout(3000) });
    return undefined;
  } catch (err) {
    const e = err as Error & { $metadata?: { httpStatusCode?: number } };
    return `${e.name}${e.$metadata?.httpStatusCode ? ` (HTTP ${e.$metadata.httpStatusCode})` : ''}: ${e.message} at ${s3Env().AWS_ENDPOINT_URL}, bucket ${S3_BUCKET} (start it with scripts/s3/start.sh)`;
  } finally {
    client.destroy();
  }
}

/** Skips the test without the S3 server, or fails it with SHARDFLOW_REQUIRE_BROKERS=1. @returns true when skipped */
export async function skipWithoutS3(t: TestContext): Promise<boolean> {
  const reason = await s3Unavailable();
  if (!reason) return false;
  if (process.env.SHARDFLOW_REQUIRE_BROKERS === '1') throw new Error(`the S3 server is required (SHARDFLOW_REQUIRE_BROKERS=1) but unavailable: ${reason}`);
  t.skip(`S3 server unavailable: ${reason}`);
  return true;
}
