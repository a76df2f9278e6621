#!/usr/bin/env node
import { runService } from '@bosun/transport';
import { specialistService } from './service.js';

runService(specialistService());
