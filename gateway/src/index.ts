export { startGateway, type Gateway } from './gateway.js';
export { loadConfig, ConfigSchema, ConfigError, type Config, type ConfigInput } from './config.js';
export { GatewayError, ERRORS, type ErrorCode } from './errors.js';
export type { GatewayEvent, EventType } from './events/bus.js';
