/**
 * egs-hub's JupyterLab extension: the EGS GPUs sidebar (left), its status bar item,
 * notifications and settings. Everything it reads and does goes through the egs-hub
 * server extension on the user's own server (``egs/api/...``, ``egs/config``,
 * ``egs/restart``).
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';

import { EgsApi } from './api';
import { EgsModel } from './model';
import { Notifier } from './notifier';
import { EgsStatus, STATUS_ID } from './statusbar';
import { DEFAULT_SETTINGS, IEgsSettings } from './tokens';
import { EgsSidebar, SIDEBAR_ID } from './widget';

const PLUGIN_ID = 'egs-hub:plugin';

function readSettings(settings: ISettingRegistry.ISettings): IEgsSettings {
  return {
    refreshInterval: (settings.get('refreshInterval').composite as number) ?? DEFAULT_SETTINGS.refreshInterval,
    notifications: (settings.get('notifications').composite as boolean) ?? DEFAULT_SETTINGS.notifications
  };
}

async function restartServer(model: EgsModel): Promise<void> {
  try {
    await model.restartServer();
    Notification.info('Your server is restarting with the GPUs just bound; JupyterLab reconnects when it is back.', {
      autoClose: 15000
    });
  } catch (error) {
    Notification.error(`Could not restart the server: ${(error as Error).message}`, { autoClose: false });
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'EGS GPUs sidebar: GPU requests, wait times, GPUs and notifications of your workspaces',
  autoStart: true,
  optional: [ISettingRegistry, IStatusBar, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    restorer: ILayoutRestorer | null
  ) => {
    const model = new EgsModel(new EgsApi());
    const sidebar = new EgsSidebar(model);
    app.shell.add(sidebar, 'left', { rank: 900 });
    restorer?.add(sidebar, SIDEBAR_ID);
    new Notifier(model, () => void restartServer(model), window.localStorage);
    if (statusBar) {
      statusBar.registerStatusItem(STATUS_ID, {
        item: new EgsStatus(model, () => app.shell.activateById(SIDEBAR_ID)),
        align: 'left',
        rank: 100
      });
    }
    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          model.settings = readSettings(settings);
          settings.changed.connect(() => {
            model.settings = readSettings(settings);
          });
        })
        .catch(reason => console.error('egs-hub: could not load settings', reason))
        .finally(() => model.start());
    } else {
      model.start();
    }
  }
};

export default plugin;
