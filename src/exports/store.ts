/** The object store exports write to (../s3/object-store.ts), and where a user's files lie in it. */
export { s3ErrorOf, type ObjectStore, type StoredPart } from '../s3/object-store.js';

/** A user's export files in the store: `exports/<user id>/<job id>/<attempt>/<file name>`. */
export function userPrefix(userId: string): string {
  return `exports/${userId}/`;
}

/** One job's files, of every attempt. */
export function jobPrefix(job: { id: string; user_id: string }): string {
  return `${userPrefix(job.user_id)}${job.id}/`;
}
