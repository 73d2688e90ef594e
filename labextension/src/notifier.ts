/**
 * Notifications with JupyterLab's ``Notification`` API, each once per GPR and kind:
 * a GPR provisioned (with a "Restart server to use the GPUs" action), its window
 * ending in 10 minutes, an eviction, an idle release or a failure. Which were given
 * is kept in localStorage per user, so a reload or a second tab does not repeat them.
 */
import { Notification } from '@jupyterlab/apputils';

import { EgsModel, IEgsState } from './model';
import { dueNotices, INotice, ownGprs } from './state';

const KEEP = 500;
export const RESTART_LABEL = 'Restart server to use the GPUs';

export class Notifier {
  constructor(
    private readonly model: EgsModel,
    private readonly restart: () => void,
    private readonly storage: Storage | null
  ) {
    model.changed.connect(this.onChanged, this);
  }

  private storageKey(state: IEgsState): string {
    return `egs-hub:notified:${state.config?.user ?? ''}`;
  }

  private load(key: string): Set<string> {
    try {
      return new Set(JSON.parse(this.storage?.getItem(key) ?? '[]') as string[]);
    } catch {
      return new Set();
    }
  }

  private onChanged(_: EgsModel, state: IEgsState): void {
    if (state.error !== null || state.updatedAt === null || state.updatedAt === this._seen) {
      return;
    }
    this._seen = state.updatedAt;
    const key = this.storageKey(state);
    const { notices, sent } = dueNotices(ownGprs(state.gprs, state.config?.user ?? null), state.updatedAt, this.load(key), this._first);
    this._first = false;
    this.storage?.setItem(key, JSON.stringify([...sent].slice(-KEEP)));
    if (this.model.settings.notifications) {
      notices.forEach(notice => this.emit(notice));
    }
  }

  private emit(notice: INotice): void {
    switch (notice.kind) {
      case 'provisioned':
        Notification.success(notice.message, {
          autoClose: false,
          actions: [{ label: RESTART_LABEL, callback: () => this.restart(), displayType: 'accent' }]
        });
        break;
      case 'replaced':
        Notification.warning(notice.message, {
          autoClose: false,
          actions: [{ label: RESTART_LABEL, callback: () => this.restart(), displayType: 'accent' }]
        });
        break;
      case 'ending':
      case 'idle-released':
        Notification.warning(notice.message, { autoClose: false });
        break;
      case 'evicted':
      case 'failed':
        Notification.error(notice.message, { autoClose: false });
        break;
    }
  }

  private _first = true;
  private _seen: number | null = null;
}
