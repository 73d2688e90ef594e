/** A message the sidebar shows above its sections: what an action did, or why it failed. */
export interface IPanelNotice {
  text: string;
  error: boolean;
}

export type ShowNotice = (notice: IPanelNotice | null) => void;

/** Run a person's action: show what it did, or its error's message. */
export async function runAction(show: ShowNotice, action: () => Promise<string>): Promise<void> {
  try {
    show({ text: await action(), error: false });
  } catch (error) {
    show({ text: (error as Error).message, error: true });
  }
}
