import { LabIcon } from '@jupyterlab/ui-components';

import gpuSvg from '../style/icons/gpu.svg';

export const gpuIcon = new LabIcon({ name: 'egs-hub:gpu', svgstr: gpuSvg });
