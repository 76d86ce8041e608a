// Type definitions for PayCheckout v1, the embedded checkout component.
// Load the script with <script src="/paycheckout.js"></script>; it defines one global, PayCheckout.
// Reference these types with: /// <reference path="paycheckout.d.ts" />

declare namespace PayCheckout {
  /** `inline` mounts the iframe into `containerId`; `modal` opens a centred dialog with a backdrop. */
  type Mode = 'inline' | 'modal';

  /** Payload of `payment.success` (onSuccess). */
  interface SuccessPayload {
    /** The payment request's successUrl, or "" when none is set. */
    url: string;
    /** Payment request identifier. */
    requestId: string;
    /** Identifier of the payment (transaction) that completed. */
    paymentId: string;
  }

  /** Payload of `payment.failure` (onFailure): the payment failed or was declined. */
  interface FailurePayload {
    /** The payment request's failureUrl, or "" when none is set. */
    url: string;
    requestId: string;
    paymentId: string;
  }

  /** Payload of `payment.pending` (onPending): an asynchronous flow, e.g. waiting for a bank. */
  interface PendingPayload {
    /** The payment request's successUrl, or "" when none is set. */
    url: string;
    requestId: string;
  }

  /** Payload of `payment.cancel` (onCancel): always an empty object. */
  type CancelPayload = Record<string, never>;

  /** Payload of `payment.ready` (onReady): always an empty object. */
  type ReadyPayload = Record<string, never>;

  /**
   * Payload of `payment.resize` (no callback): the checkout page's content height in CSS pixels.
   * The page posts it once ready and whenever its content height changes; PayCheckout sets the
   * iframe height to the larger of this and the `height` option.
   */
  interface ResizePayload {
    height: number;
  }

  /** Message that the checkout page posts to the parent window (for reference; PayCheckout validates it). */
  type Message =
    | { source: 'paycheckout'; type: 'payment.resize'; data: ResizePayload }
    | { source: 'paycheckout'; type: 'payment.ready'; data: ReadyPayload }
    | { source: 'paycheckout'; type: 'payment.success'; data: SuccessPayload }
    | { source: 'paycheckout'; type: 'payment.failure'; data: FailurePayload }
    | { source: 'paycheckout'; type: 'payment.pending'; data: PendingPayload }
    | { source: 'paycheckout'; type: 'payment.cancel'; data: CancelPayload };

  interface BaseOptions {
    /**
     * Checkout page URL with the query parameters `requestId` and `token` (a checkout session token
     * minted by your server). Never put the merchant API key here. Must be https (http is accepted
     * only for localhost / 127.0.0.1 during development).
     */
    paymentUrl: string;
    /** iframe width (inline) or dialog width (modal), as a CSS length. Default "480px". */
    width?: string;
    /**
     * Initial and minimum CSS height of the iframe. Default "700px". The checkout page reports its
     * content height (`payment.resize`, accepted only from the checkout origin and this iframe) and
     * the iframe grows to fit it, and shrinks back, never below this value. In modal mode the
     * iframe is also capped at the viewport height minus 80px (the dialog scrolls).
     */
    height?: string;
    /**
     * Language of the checkout page, as a BCP 47 tag ("en", "de", "fr", "es", "pt", "hi", or with a
     * region such as "pt-BR", which also picks the region's number format). Default: the shopper's
     * browser languages (Accept-Language). A language the page does not have falls back to that
     * default, then English. Amounts are always formatted in the page's language.
     */
    locale?: string;
    /** Payment completed. Terminal: the component removes itself after the callback. */
    onSuccess?: (payload: SuccessPayload) => void;
    /** Payment failed or was declined. Terminal. */
    onFailure?: (payload: FailurePayload) => void;
    /** The user cancelled in the page, closed the modal or pressed Esc. Terminal. */
    onCancel?: (payload: CancelPayload) => void;
    /** Asynchronous flow, e.g. waiting for a bank; confirm the result on your server. Terminal. */
    onPending?: (payload: PendingPayload) => void;
    /** The checkout page has loaded in the iframe. Called at most once per session. */
    onReady?: (payload: ReadyPayload) => void;
  }

  interface InlineOptions extends BaseOptions {
    /** Default "inline". */
    mode?: 'inline';
    /** ID of the element that receives the iframe. Required in inline mode. */
    containerId: string;
  }

  interface ModalOptions extends BaseOptions {
    mode: 'modal';
    /** Ignored in modal mode. */
    containerId?: string;
  }

  type Options = InlineOptions | ModalOptions;

  /**
   * Mounts the checkout iframe (inline or modal) and binds the listeners. Destroys an open session
   * first. Throws an Error when the options are invalid (e.g. inline mode without containerId, or a
   * paymentUrl without requestId and token).
   */
  function init(options: Options): void;

  /**
   * Removes the iframe or overlay and every listener, and restores body scroll. Called automatically
   * after a terminal event; calling it again, or with nothing open, does nothing.
   */
  function destroy(): void;

  /** Component version. */
  const version: string;
}

interface Window {
  PayCheckout: typeof PayCheckout;
}
