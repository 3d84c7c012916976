import { z } from 'zod';

/**
 * Field types that several schemas share, defined once. (The config helper of issue 18 is creating
 * config/fields.ts for the configuration's field types: when it lands, these move there.)
 */

/** An http: or https: URL, as a remote service is reached. */
export const HttpUrl = z.url({ protocol: /^https?$/ });
