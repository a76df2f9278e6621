import type { TestProject } from 'vitest/node';
import { resolveServices } from './services.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    natsUrl: string;
  }
}

/** Resolves Redis and NATS once for the whole run and hands their URLs to every test file. */
export default async function setup(project: TestProject) {
  const { urls, stop } = await resolveServices();
  project.provide('redisUrl', urls.redisUrl);
  project.provide('natsUrl', urls.natsUrl);
  process.env.REDIS_URL = urls.redisUrl;
  process.env.NATS_URL = urls.natsUrl;
  return stop;
}
