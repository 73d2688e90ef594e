import { useEffect, useState } from 'react';

/** The time (ms since the epoch), updated every ``periodMs`` while the component is mounted. */
export function useNow(periodMs: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), periodMs);
    return () => window.clearInterval(timer);
  }, [periodMs]);
  return now;
}
