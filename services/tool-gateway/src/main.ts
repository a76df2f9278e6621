#!/usr/bin/env node
import { runService } from '@bosun/transport';
import { gatewayService } from './service.js';

runService(gatewayService);
