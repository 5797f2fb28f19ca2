import type { Config } from '../config.js';
import { localProvider } from './local.js';
import { paddleProvider } from './paddle.js';
import type { PaymentProvider } from './provider.js';

/** The provider the operator configured (PMLAKE_PAYMENT_PROVIDER), or null: no checkout on this server. */
export function configuredProvider(config: Config): PaymentProvider | null {
  switch (config.payments.provider) {
    case 'local':
      return localProvider();
    case 'paddle':
      return paddleProvider(config.payments.paddle);
    default:
      return null;
  }
}
