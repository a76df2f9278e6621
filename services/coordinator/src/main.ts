#!/usr/bin/env node
import { runService } from '@bosun/transport';
import { coordinatorService } from './service.js';

runService(coordinatorService());
