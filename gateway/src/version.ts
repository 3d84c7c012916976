export const GATEWAY_NAME = 'voxgate';
export const GATEWAY_VERSION = '0.1.0';
