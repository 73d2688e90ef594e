// Slices (workspaces) and their members, through the REST API.
"use strict";

import { api } from "./api.js";

const path = (name) => `slices/${encodeURIComponent(name)}`;
export const createSlice = (body) => api("POST", "slices", body);
export const updateSlice = (name, body) => api("PATCH", path(name), body);
export const deleteSlice = (name) => api("DELETE", path(name));
export const addMember = (name, user) => api("PUT", `${path(name)}/members/${encodeURIComponent(user)}`);
export const removeMember = (name, user) => api("DELETE", `${path(name)}/members/${encodeURIComponent(user)}`);
