export { startGateway, type Gateway } from './gateway.js';
export { loadConfig, ConfigSchema, ConfigError, type Config, type ConfigInput } from './config.js';
export { GatewayError, ERROR_CODES, type ErrorCode } from './errors.js';
export { HTTP_PROBLEMS } from './api/problem.js';
export type { GatewayEvent, EventType } from './events/bus.js';
